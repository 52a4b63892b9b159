"""Make fairseq-fixed's setup.py build without torch: only its torch-free extensions.

fairseq's setup.py imports ``torch.utils.cpp_extension`` and builds six extensions. Three
link against torch's C++ ABI (libbase: BASE layers, libnat: non-autoregressive models,
alignment_train_cpu_binding: an example's operator); a build made here against one torch
would not load against another (e.g. the GPU machine's torch 2.11), and translation
training imports none of them (each is imported lazily where it is used). The other three
(libbleu, data_utils_fast, token_block_utils_fast) need only Python and numpy; batching
needs data_utils_fast. This script removes the torch import and the torch-linked
extensions, and stops with an error when setup.py does not have the expected shape (a new
fairseq-fixed release), rather than building something else silently.

Usage: python -m research.gpu.patch_fairseq_setup PATH/TO/fairseq_fixed-X/setup.py
"""

import re
import sys

TORCH_IMPORT = "from torch.utils import cpp_extension\n"
# From the first block of cpp_extension.CppExtension (CPU) through the CUDA_HOME block
# up to the cmdclass that names torch's BuildExtension.
TORCH_EXTENSIONS = re.compile(
    r"\nextensions\.extend\(\n    \[\n        cpp_extension\.CppExtension\(.*?"
    r'\ncmdclass = \{"build_ext": cpp_extension\.BuildExtension\}\n',
    re.DOTALL,
)


def patch(text):
    if text.count(TORCH_IMPORT) != 1 or len(TORCH_EXTENSIONS.findall(text)) != 1:
        raise SystemExit(
            "patch_fairseq_setup: setup.py does not have the shape of fairseq-fixed "
            "0.12.3.1 (one torch import, one block of torch extensions); pin "
            "FAIRSEQ_VERSION=0.12.3.1 in research/gpu/build-wheelhouse.sh or update this patch"
        )
    text = text.replace(TORCH_IMPORT, "")
    text = TORCH_EXTENSIONS.sub(
        "\n# torch-linked extensions (libbase, libnat, alignment_train_*) left out: see "
        "autoassist-fairseq's research/gpu/patch_fairseq_setup.py\ncmdclass = {}\n",
        text,
    )
    if "cpp_extension" in text:
        raise SystemExit("patch_fairseq_setup: setup.py still names cpp_extension after the patch")
    return text


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    with open(argv[1], encoding="utf-8") as f:
        text = f.read()
    with open(argv[1], "w", encoding="utf-8") as f:
        f.write(patch(text))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
