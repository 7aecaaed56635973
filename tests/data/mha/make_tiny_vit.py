"""Makes tiny_vit_torchscript.onnx and tiny_vit_dynamo.onnx: torchvision's VisionTransformer (image 8, patch 4,
one encoder layer of width 8, 2 heads, MLP 16, 3 classes) exported by torch.onnx in training mode, as a user
would. Its nn.MultiheadAttention splits q, k and v out of one packed projection through
Unsqueeze -> Transpose (3,1,2,0,4) -> Squeeze -> Gather x3, and its MLP spells nn.GELU as Div/Erf/Add/Mul/Mul
below opset 20: what graph/autodiff/gather_before_transpose.h and fused_gelu.h rewrite
(tests/gather_before_transpose_test.cc). Run: python3 make_tiny_vit.py (torch, torchvision, onnx, onnxscript)."""
import torch
import torchvision

torch.manual_seed(0)
model = torchvision.models.VisionTransformer(image_size=8, patch_size=4, num_layers=1, num_heads=2, hidden_dim=8,
                                             mlp_dim=16, num_classes=3).train()
x = torch.randn(2, 3, 8, 8)
common = dict(input_names=["input"], output_names=["logits"], export_params=True)
torch.onnx.export(model, (x,), "tiny_vit_torchscript.onnx", dynamo=False, opset_version=17,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, **common)
torch.onnx.export(model, (x,), "tiny_vit_dynamo.onnx", dynamo=True, opset_version=18, optimize=False,
                  external_data=False, dynamic_shapes={"x": {0: torch.export.Dim("batch")}}, **common)
