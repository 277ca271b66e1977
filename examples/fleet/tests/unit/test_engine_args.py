from testfleet import register_cpu_ci

register_cpu_ci(est_time=15, suite="stage-b-cpu", labels=["rollout"])


def main():
    args = "--tp 2 --dp 4".split()
    parsed = dict(zip(args[::2], args[1::2]))
    assert parsed == {"--tp": "2", "--dp": "4"}
    print("engine args ok")


if __name__ == "__main__":
    main()
