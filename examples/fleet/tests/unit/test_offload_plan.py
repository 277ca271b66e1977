from testfleet import register_cpu_ci

register_cpu_ci(est_time=45, suite="stage-b-cpu", labels=["offload"])


def main():
    layers = list(range(8))
    on_cpu = [layer for layer in layers if layer % 2]
    assert len(on_cpu) == 4
    print("offload plan ok")


if __name__ == "__main__":
    main()
