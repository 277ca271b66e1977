from testfleet import register_cpu_ci

register_cpu_ci(est_time=60, suite="stage-b-cpu", labels=["long"], nightly=True)


def main():
    total = sum(i * i for i in range(200_000))
    assert total > 0
    print("long horizon ok")


if __name__ == "__main__":
    main()
