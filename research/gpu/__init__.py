"""The GPU check (docs/gpu.md): build-wheelhouse.sh gathers the wheels, check.sh installs
them on the GPU machine and runs check_steps.py's steps."""
