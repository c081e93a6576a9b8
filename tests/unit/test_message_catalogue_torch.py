"""The message catalogue's torch part (issue 24): torch releases read out of their wheels."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from tools_loader import run_catalogue, shipped_catalogue, tool

WHEELS = Path("/work/cache/torch-wheels")
CPP = Path("/work/cache/torch-cpp")


def wheel(directory: Path, name: str, files: dict[str, str]) -> None:
    with zipfile.ZipFile(directory / name, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)


def test_wheel_versions_are_read_from_the_file_name() -> None:
    version_of = tool("torchwheels").version_of
    assert version_of(Path("torch-2.12.1-cp312-cp312-macosx_14_0_arm64.whl")) == "2.12.1"
    assert version_of(Path("torch-2.10.0-2-cp312-none-macosx_11_0_arm64.whl")) == "2.10.0"
    assert version_of(Path("torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl")) == "2.13.0"
    assert version_of(Path("torchvision-0.20.0-cp312-cp312-macosx_11_0_arm64.whl")) is None


def test_templates_merge_across_the_releases_of_the_wheels(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    old_header = 'TORCH_CHECK(ok, "Socket Timeout while waiting for ", key, " to be set");\n'
    run_py = 'logger.warning("Received %s death signal, shutting down workers", sig)\n'
    wheel(wheels, "torch-1.8.1-cp39-none-macosx_10_9_x86_64.whl", {
        "torch/include/c10d/TCPStore.hpp": old_header,
        "torch/distributed/launch.py": 'raise ValueError("launch.py is gone after 1.10")\n',
        "torch/nn/modules/module.py": 'raise RuntimeError("not a distributed file at all")\n',
    })
    wheel(wheels, "torch-1.10.2-cp39-none-macosx_10_9_x86_64.whl", {
        "torch/include/torch/csrc/distributed/c10d/TCPStore.hpp": old_header,
        "torch/distributed/run.py": run_py,
    })
    wheel(wheels, "torch-2.0.1-cp311-none-macosx_11_0_arm64.whl", {
        "torch/distributed/run.py": run_py + 'log.info("[%(role)s] Rendezvous complete", d)\n',
    })
    doc = run_catalogue(tmp_path, "--torch-wheels", str(wheels))
    assert doc["releases"] == {"torch": ["v1.8.1", "v1.10.2", "v2.0.1"]}
    messages = doc["messages"]
    assert isinstance(messages, list)
    found = {m["template"]: (m["file"], m["first"], m["last"], m["releases"]) for m in messages}
    assert found == {
        # torch/lib/c10d (1.8) and torch/csrc/distributed/c10d (later) are one file
        "Socket Timeout while waiting for <*> to be set":
            ("torch/csrc/distributed/c10d/TCPStore.hpp", "v1.8.1", "v1.10.2", 2),
        "launch.py is gone after 1.10": ("torch/distributed/launch.py", "v1.8.1", "v1.8.1", 1),
        "Received <*> death signal, shutting down workers":
            ("torch/distributed/run.py", "v1.10.2", "v2.0.1", 2),
        "[<*>] Rendezvous complete": ("torch/distributed/run.py", "v2.0.1", "v2.0.1", 1),
    }
    assert all(m["maps"] and m["reason"] for m in messages)


def test_a_wheel_and_a_tree_of_the_same_release_are_one_release(tmp_path: Path) -> None:
    wheels, tree = tmp_path / "wheels", tmp_path / "tree" / "torch" / "distributed"
    wheels.mkdir()
    tree.mkdir(parents=True)
    wheel(wheels, "torch-2.13.0-cp312-cp312-macosx_14_0_arm64.whl",
          {"torch/distributed/run.py": 'raise ValueError("the wheel says this")\n'})
    (tree / "run.py").write_text('raise ValueError("the tree says that")\n')
    doc = run_catalogue(tmp_path, "--torch-wheels", str(wheels),
                        "--torch", f"v2.13.0={tmp_path / 'tree'}")
    assert doc["releases"] == {"torch": ["v2.13.0"]}
    assert {m["template"] for m in doc["messages"]} == {"the wheel says this", "the tree says that"}


def test_stored_cpp_files_are_labelled_by_their_version_txt_or_commit(tmp_path: Path) -> None:
    wheels, cpp = tmp_path / "wheels", tmp_path / "cpp"
    wheels.mkdir()
    wheel(wheels, "torch-2.0.1-cp311-none-macosx_11_0_arm64.whl",
          {"torch/distributed/run.py": 'raise ValueError("from the wheel")\n'})
    released = cpp / "04ee2b9e1265ddc1bc9a2d94ddd348a482f253ba"
    (released / "torch/csrc/distributed/c10d").mkdir(parents=True)
    (released / "version.txt").write_text("2.0.1\n")
    (released / "torch/csrc/distributed/c10d/socket.cpp").write_text(
        'C10D_ERROR("The server socket has failed to listen on {}.", addr);\n')
    unknown = cpp / "cf1380dfb6c8552c8cdb791a85a89499775ad409" / "torch/lib/c10d"
    unknown.mkdir(parents=True)
    (unknown / "ProcessGroupNCCL.cpp").write_text(
        'LOG(ERROR) << "NCCL watchdog thread terminated with exception: " << e.what();\n'
        'TORCH_CHECK(false, "a check of ProcessGroupNCCL") ;\n')
    (unknown / "reducer.cpp").write_text('TORCH_CHECK(false, "reducer is not read");\n')
    doc = run_catalogue(tmp_path, "--torch-wheels", str(wheels), "--torch-cpp", str(cpp))
    assert doc["releases"] == {"torch": ["v2.0.1", "git cf1380dfb6c8"]}
    found = {m["template"]: (m["file"], m["first"], m["last"]) for m in doc["messages"]}
    assert found == {
        "from the wheel": ("torch/distributed/run.py", "v2.0.1", "v2.0.1"),
        "The server socket has failed to listen on <*>.":
            ("torch/csrc/distributed/c10d/socket.cpp", "v2.0.1", "v2.0.1"),
        "NCCL watchdog thread terminated with exception: <*>":
            ("torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp", "git cf1380dfb6c8",
             "git cf1380dfb6c8"),
        "a check of ProcessGroupNCCL":
            ("torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp", "git cf1380dfb6c8",
             "git cf1380dfb6c8"),
    }


@pytest.mark.slow
@pytest.mark.skipif(not WHEELS.is_dir() or not CPP.is_dir(),
                    reason="needs the torch wheels (tools/torchwheels.py) and the stored .cpp files")
def test_the_script_regenerates_the_torch_part(tmp_path: Path) -> None:
    fresh = run_catalogue(tmp_path, "--torch-wheels", str(WHEELS), "--torch-cpp", str(CPP))
    shipped = shipped_catalogue()["messages"]
    assert isinstance(shipped, list)
    assert fresh["messages"] == [m for m in shipped if m["source"] == "torch"]
