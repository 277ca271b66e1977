from testfleet import register_cpu_ci

register_cpu_ci(est_time=20, suite="stage-b-cpu", labels=["rollout"])


def main():
    buffer = []
    for i in range(10):
        buffer.append({"prompt": i, "reward": i % 3})
    assert sum(x["reward"] for x in buffer) == 9
    print("rollout buffer ok")


if __name__ == "__main__":
    main()
