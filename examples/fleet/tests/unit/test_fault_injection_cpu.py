from testfleet import register_cpu_ci

register_cpu_ci(
    est_time=25,
    suite="stage-b-cpu",
    labels=["ft-short"],
    disabled="Flaky under the new rollout scheduler, see #2301",
)


def main():
    raise SystemExit("not ready")


if __name__ == "__main__":
    main()
