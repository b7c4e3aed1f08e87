"""The package's public names, and what `import daydream` loads."""

import subprocess
import sys

import daydream


def test_import_daydream_loads_only_the_reader_and_the_simulator():
    # Recording, calibration and prediction (and torch with them) load on
    # first use, so `daydream replay` starts sooner.
    code = (
        "import sys, daydream\n"
        "heavy = [m for m in ('daydream.calibrate', 'daydream.capture', 'daydream.cupti', "
        "'daydream.prediction', 'torch') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_replay_command_path_loads_no_dataclasses():
    # `dataclasses` imports `inspect` (with ast, dis, tokenize): a third of
    # what `import daydream` took, on every `daydream replay` and `info`.
    code = (
        "import sys, daydream.cli\n"
        "print(','.join(m for m in ('dataclasses', 'inspect') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_lazy_names_resolve_to_their_modules():
    from daydream import calibrate, capture, prediction

    assert daydream.calibrate_network is calibrate.calibrate_network
    assert daydream.NetworkCalibration is calibrate.NetworkCalibration
    assert daydream.Profiler is capture.Profiler
    assert daydream.profile is capture.profile
    assert daydream.predict is prediction.predict
    assert daydream.Prediction is prediction.Prediction
    assert daydream.passes is prediction.passes
    assert daydream.cupti.__name__ == "daydream.cupti"
    assert set(daydream.__all__) <= set(dir(daydream))


def test_unknown_attribute_is_an_attribute_error():
    try:
        daydream.no_such_name
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("daydream.no_such_name resolved")
