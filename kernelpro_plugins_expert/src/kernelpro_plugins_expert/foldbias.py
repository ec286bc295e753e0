"""Conv bias folding: the graph pass behind the expert's ``fold`` candidates.

PyTorch runs a convolution module with a bias on a GPU as the library's kernel without the
bias and then one more elementwise kernel that adds it, a full read and write of the
output. In the tuning sample's profiles (call BW, `docs/validation/expert_generalisation.md`)
that add took 0.44-1.74 ms of 1.35-6.6 ms (15-35 %) on each of the five level-2 problems
with a convolution. This pass rewrites a traced graph so that each such convolution runs
without its bias, followed by ``conv + bias.view(C, 1, ...)`` as an ordinary add node,
which the recognizer then fuses into the kernel that consumes the convolution's output
(a pointwise chain, or the prologue of a pooling, reduction or softmax kernel, which loads
the bias by each element's channel).

Only the source text of :func:`_kp_split_conv_bias` matters: the generator copies it into
every ``fold`` candidate, whose lowering applies it to its own trace before it looks up
the regions' nodes, so the generator and the candidate see the same graph and node names.
It imports what it needs itself, and its annotations are strings (a candidate file has no
``Any``).
"""

from __future__ import annotations

from typing import Any


def _kp_split_conv_bias(gm: "Any") -> "list[str]":
    """Split the bias off every convolution module of ``gm`` (a torch.fx GraphModule) that
    has one, is called on one tensor, is not depthwise, pads with zeros and whose output has
    one user that is not the graph's output; returns the module paths split, in graph order."""
    import operator

    import torch.nn as nn
    import torch.nn.functional as F

    funcs = {nn.Conv1d: F.conv1d, nn.Conv2d: F.conv2d, nn.Conv3d: F.conv3d, nn.ConvTranspose1d: F.conv_transpose1d,
             nn.ConvTranspose2d: F.conv_transpose2d, nn.ConvTranspose3d: F.conv_transpose3d}
    split = []
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or len(node.args) != 1 or node.kwargs:
            continue
        mod = gm.get_submodule(node.target)
        func = funcs.get(type(mod))
        if func is None or mod.bias is None or mod.padding_mode != "zeros":
            continue
        if mod.groups > 1 and mod.groups == mod.in_channels == mod.out_channels:
            continue  # depthwise: the windowed (pool) kernel adds its bias itself
        users = list(node.users)
        if len(users) != 1 or users[0].op == "output":
            continue  # nothing after it to take the add, or several readers of the biased value
        rank = len(mod.kernel_size)
        rest: tuple = (mod.stride, mod.padding, mod.dilation, mod.groups)
        if isinstance(mod, nn.modules.conv._ConvTransposeNd):
            rest = (mod.stride, mod.padding, mod.output_padding, mod.groups, mod.dilation)
        with gm.graph.inserting_before(node):
            weight = gm.graph.get_attr(node.target + ".weight")
            conv = gm.graph.call_function(func, (node.args[0], weight, None) + rest)
            bias = gm.graph.get_attr(node.target + ".bias")
            shaped = gm.graph.call_method("view", (bias, (-1,) + (1,) * rank))
            added = gm.graph.call_function(operator.add, (conv, shaped))
        node.replace_all_uses_with(added)
        gm.graph.erase_node(node)
        split.append(node.target)
    if split:
        gm.graph.lint()
        gm.recompile()
    return split
