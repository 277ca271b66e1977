from testfleet import register_cpu_ci

register_cpu_ci(30, "stage-b-cpu")


def main():
    weights = {"w": [1.0, 2.0]}
    synced = {k: list(v) for k, v in weights.items()}
    assert synced == weights
    print("weight sync ok")


if __name__ == "__main__":
    main()
