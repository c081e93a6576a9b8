"""causes/cuda_toolkit.py: DeepSpeed refusing to compile its ops with a CUDA toolkit other than
torch's is version-mismatch; the same words where it accepts the pair are not. Lines made from
DeepSpeed's op_builder/builder.py, assert_no_cuda_mismatch (v0.19.5; v0.3's raised a bare
Exception without the ">- DeepSpeed Op Builder: " head):

- raise CUDAMismatchException(f">- DeepSpeed Op Builder: Installed CUDA version
  {sys_cuda_version} does not match the version torch was compiled with {torch.version.cuda},
  unable to compile cuda/cpp extensions without a matching cuda version.")
- print(f"Installed CUDA version {sys_cuda_version} does not match the version torch was compiled
  with {torch.version.cuda} but since the APIs are compatible, accepting this combination")
- print(f"{WARNING} DeepSpeed Op Builder: Installed CUDA version ... does not match the version
  torch was compiled with ....Detected `DS_SKIP_CUDA_CHECK=1`: Allowing this combination ...")
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cause_logs import top

TRACE = ["Traceback (most recent call last):", '  File "setup.py", line 3, in <module>',
         "    assert_no_cuda_mismatch(self.name)"]
REFUSED = ("Installed CUDA version {mine} does not match the version torch was compiled with "
           "{torch}, unable to compile cuda/cpp extensions without a matching cuda version.")


@pytest.mark.parametrize(("mine", "torch"), [("12.2", "11.7"), ("11.0", "11.1"), ("10.2", "12.4.1")])
@pytest.mark.parametrize("head", ["deepspeed.ops.op_builder.builder.CUDAMismatchException: >- "
                                  "DeepSpeed Op Builder: ", "Exception: ", ""])
def test_the_op_builder_refusing_a_toolkit_is_a_version_mismatch(tmp_path: Path, mine: str,
                                                                 torch: str, head: str) -> None:
    found = top(tmp_path, [*TRACE, head + REFUSED.format(mine=mine, torch=torch)])
    assert (found.id, found.severity) == ("version-mismatch", "error")
    assert f"CUDA {mine} installed" in found.explanation and "CUDA_HOME" in found.fix


@pytest.mark.parametrize("line", [
    "Installed CUDA version 11.8 does not match the version torch was compiled with 11.7 but "
    "since the APIs are compatible, accepting this combination",
    " [WARNING]  DeepSpeed Op Builder: Installed CUDA version 12.4 does not match the version "
    "torch was compiled with 11.8.Detected `DS_SKIP_CUDA_CHECK=1`: Allowing this combination of "
    "CUDA, but it may result in unexpected behavior."])
def test_a_pair_it_accepts_is_no_mismatch(tmp_path: Path, line: str) -> None:
    found = top(tmp_path, [line, "[INFO] step 1/100 loss 2.31"])
    assert found.id != "version-mismatch"


# nvcc's driver (CUDA 11.x/12.x): "nvcc fatal   : Unsupported gpu architecture '%s'", as a JIT build
# (DeepSpeed's op builder, torch.utils.cpp_extension) passes -gencode=arch=compute_NN,code=sm_NN
# for the GPU it runs on
@pytest.mark.parametrize("arch", ["compute_89", "compute_90", "sm_100"])
def test_nvcc_refusing_the_gpus_architecture_is_a_version_mismatch(tmp_path: Path,
                                                                   arch: str) -> None:
    found = top(tmp_path, ["[1/3] /usr/local/cuda/bin/nvcc -DTORCH_EXTENSION_NAME=fused_adam "
                           f"-gencode=arch={arch},code={arch} -c fused_adam_frontend.cu",
                           f"nvcc fatal   : Unsupported gpu architecture '{arch}'",
                           "ninja: build stopped: subcommand failed."])
    assert (found.id, found.severity) == ("version-mismatch", "error")
    assert arch in found.explanation and "toolkit" in found.fix
