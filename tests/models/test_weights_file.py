"""model.weights is read as plain tensors only (torch.load with weights_only=True): a file
holding pickled objects is refused with one line naming the file and saying why, never
unpickled, never with torch's advice to load it with weights_only=False (issue 26)."""

import os

import pytest
import torch

import fedjoule
from fedjoule.cli import invoke
from fedjoule.errors import FedjouleError

TINY = {
    "training.rounds": 1,
    "population.size": 6,
    "training.clients_per_round": 2,
    "round.min_clients": 1,
}


class MakesAFolder:
    """Unpickled, this would run os.mkdir(marker): the code a weights file could carry."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


@pytest.fixture
def pickled(tmp_path):
    path = tmp_path / "weights.pt"
    torch.save({"w": torch.zeros(2), "x": MakesAFolder(str(tmp_path / "ran"))}, path)
    return path


def expected(path) -> str:
    return (
        f"model.weights {path}: refused, the file holds a pickled posix.mkdir; fedjoule "
        "loads only plain tensors and state dicts (torch.save(model.state_dict(), path)) "
        "and never unpickles code"
    )


@pytest.mark.skipif(os.name != "posix", reason="os.mkdir pickles as posix.mkdir")
def test_the_command_line_prints_one_error_line(tmp_path, pickled, capsys):
    sets = [p for k, v in {**TINY, "model.weights": pickled}.items() for p in ("--set", f"{k}={v}")]
    code = invoke(["run", "default", "--out", str(tmp_path / "out"), "--device", "cpu", *sets])
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"error: {expected(pickled)}\n"
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()


@pytest.mark.skipif(os.name != "posix", reason="os.mkdir pickles as posix.mkdir")
def test_the_api_raises_the_same_message(tmp_path, pickled):
    with pytest.raises(FedjouleError) as caught:
        fedjoule.run(
            "default", tmp_path / "out", overrides={**TINY, "model.weights": str(pickled)},
            device="cpu",
        )  # fmt: skip
    assert str(caught.value) == expected(pickled)
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()


def test_a_file_that_is_no_torch_file_is_one_line_too(tmp_path):
    path = tmp_path / "weights.pt"
    path.write_bytes(b"not a torch file")
    with pytest.raises(FedjouleError) as caught:
        fedjoule.load_scenario("default", {"model.weights": str(path)})
        fedjoule.run("default", tmp_path / "out", overrides={**TINY, "model.weights": str(path)})
    message = str(caught.value)
    assert message.startswith(f"model.weights {path}: ") and "\n" not in message
    assert "weights_only=False" not in message
