"""Every unit of a ztensor plan as a Ray task calling the CLI, then finalize.

With a shared filesystem (the plan, the input and the output directory at the same paths on
every Ray node):

    ztensor plan model.safetensors.index.json /shared/out/ --zstd 3 -o /shared/plan.json
    python ray_units.py /shared/plan.json

With a bucket instead (input, plan and output all in object storage; every node only needs to
reach the bucket, with credentials in its environment as the AWS tools take them):

    ztensor plan s3://ckpt/model.safetensors.index.json s3://ckpt/out/ --zstd 3 \\
        -o s3://ckpt/plans/plan.json
    python ray_units.py s3://ckpt/plans/plan.json

A failed task is retried by Ray; finished units are verified and skipped. The number of units
is read from the plan (a local file, or an s3:// object through boto3); `--units N` gives it
for other stores.
"""

import argparse
import json
import subprocess

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


def units_of(plan: str) -> int:
    """How many units the plan at `plan` has."""
    if plan.startswith("s3://"):
        import boto3

        bucket, _, key = plan[len("s3://") :].partition("/")
        body = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
        return len(json.loads(body)["units"])
    with open(plan) as f:
        return len(json.load(f)["units"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", help="the plan: a path, or an s3://, gs:// or az:// URL")
    parser.add_argument("--units", type=int, help="how many units (read from the plan if not given)")
    args = parser.parse_args()
    units = args.units if args.units is not None else units_of(args.plan)
    ray.init()
    for line in ray.get([run_unit.remote(args.plan, k) for k in range(units)]):
        print(line)
    subprocess.run(["ztensor", "finalize", args.plan], check=True)


if __name__ == "__main__":
    main()
