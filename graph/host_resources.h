// This machine's and this process's memory limits, and the one-line error for running out of them.
//
//   if (needed > physical_memory_bytes()) throw Error("--replicas 1000 need ...");
//   catch (const std::exception& e) { if (auto oom = out_of_resources_message(e)) ... *oom ... }
//
// std::bad_alloc (an allocation the memory or `ulimit -v` cannot hold) and the std::system_error that
// std::thread throws when it cannot start a thread (EAGAIN: no memory for its stack, or a thread limit)
// are a problem of the machine and the size of the run, not a bug: the command line reports them as one
// line, "out of memory ...", exit 1.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>

namespace onnxtrain {

// The machine's physical memory; 0 when the OS does not say.
uint64_t physical_memory_bytes();

// How much more this process may map under RLIMIT_AS (`ulimit -v`): the soft limit minus what is mapped
// now (/proc/self/statm); UINT64_MAX without a limit (or when the mapped size cannot be read).
uint64_t address_space_left_bytes();

// The address space one new std::thread reserves for its stack (glibc's default attribute: RLIMIT_STACK's
// soft limit, typically 8 MiB).
uint64_t default_thread_stack_bytes();

// "1.5 GiB", "12.0 MiB", "512 bytes".
std::string format_memory_size(uint64_t bytes);

// True for std::bad_alloc (and its subclasses) and for a std::system_error with errc
// resource_unavailable_try_again or not_enough_memory (thread creation), false for anything else.
bool is_out_of_resources(const std::exception& e);

// "out of memory: ..." for those exceptions (the std::system_error's text included), nullopt otherwise.
// `context` ("while starting 999 replica threads") goes after "out of memory" when not empty.
std::optional<std::string> out_of_resources_message(const std::exception& e, const std::string& context = "");

// Runs `f`; std::bad_alloc or a thread that cannot start becomes Error(out_of_resources_message(e,
// context)), which the command line reports in one line with exit 1. Other exceptions pass unchanged.
void with_out_of_resources_as_error(const std::string& context, const std::function<void()>& f);
// Rethrows `e`, as that Error when it is one of those exceptions.
[[noreturn]] void rethrow_with_out_of_resources_as_error(std::exception_ptr e, const std::string& context);

}  // namespace onnxtrain
