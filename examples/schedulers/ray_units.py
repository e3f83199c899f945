"""Every unit of a ztensor plan as a Ray task calling the CLI, then finalize.

    ztensor plan model.safetensors.index.json /shared/out/ --zstd 3 -o /shared/plan.json
    python ray_units.py /shared/plan.json

The plan, the input and the output directory must be on storage every Ray node sees at the
same paths. A failed task is retried by Ray; finished units are verified and skipped.
"""

import json
import subprocess
import sys

import ray


@ray.remote(num_cpus=4, max_retries=2)
def run_unit(plan: str, unit: int) -> str:
    done = subprocess.run(
        ["ztensor", "run", plan, "--unit", str(unit), "--threads", "4"],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def main() -> None:
    plan = sys.argv[1]
    with open(plan) as f:
        units = len(json.load(f)["units"])
    ray.init()
    for line in ray.get([run_unit.remote(plan, k) for k in range(units)]):
        print(line)
    subprocess.run(["ztensor", "finalize", plan], check=True)


if __name__ == "__main__":
    main()
