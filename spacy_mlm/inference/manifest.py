"""The job an output directory holds (`manifest.json`): its settings and the
sha256 of every input file and of every file of the pipeline, so that a rerun
resumes only the very same job. A file edited in place (same path, same record
count) or a retrained pipeline would otherwise leave shards of two jobs side by
side, each looking right."""
import json
import os
from pathlib import Path
from typing import Dict, List, Sequence

import srsly

from ..errors import SpacyMlmError
from ..util.io import atomic_write_text
from .shards import file_sha256, shard_files

MANIFEST = "manifest.json"


def tree_sha256(directory: Path) -> Dict[str, str]:
    """{path relative to `directory`: sha256} of every file below it (symbolic
    links followed; hidden files and folders left out: temporary files of a save,
    markers, editor files, none of which is the pipeline)."""
    digests = {}
    for root, folders, files in os.walk(directory, followlinks=True):
        folders[:] = sorted(f for f in folders if not f.startswith("."))
        for name in sorted(f for f in files if not f.startswith(".")):
            path = Path(root) / name
            digests[path.relative_to(directory).as_posix()] = file_sha256(path)
    return digests


def describe_job(pipeline: Path, input_path: Path, input_files: Sequence[Path], **settings) -> Dict:
    """The manifest of a job: resolved paths, content digests and `settings`."""
    return {"pipeline": str(pipeline), "pipeline_files": tree_sha256(pipeline), "input": str(input_path),
            "input_files": {str(f): file_sha256(f) for f in input_files}, **settings}


def _file_changes(what: str, found: Dict[str, str], now: Dict[str, str]) -> List[str]:
    changed = [name for name in now if name in found and found[name] != now[name]]
    return ([f"{what} {name} changed" for name in changed]
            + [f"{what} {name} is new" for name in now if name not in found]
            + [f"{what} {name} is gone" for name in found if name not in now])


def job_changes(found: Dict, job: Dict) -> List[str]:
    """What differs between the manifest `found` and `job`, in words."""
    changes = []
    for key in sorted(set(found) | set(job)):
        before, now = found.get(key), job.get(key)
        if before == now:
            continue
        if key in ("input_files", "pipeline_files") and not isinstance(before, dict):
            changes.append(f"{key} not recorded (written by an earlier spacy-mlm)")
        elif key == "input_files":
            changes += _file_changes("input file", before, now)
        elif key == "pipeline_files":
            changes.append(f"the pipeline {job['pipeline']} changed "
                           f"({', '.join(_file_changes('file', before, now))})")
        else:
            changes.append(f"{key}: {json.dumps(before)} -> {json.dumps(now)}")
    return changes


def claim_output_dir(output_dir: Path, job: Dict, force: bool) -> None:
    """Write the job's manifest, or check that the one there describes the same
    job (a rerun, which resumes). Another job's directory is refused, naming
    what changed; with `force` its shards are removed and the job starts over."""
    output_dir.mkdir(parents=True, exist_ok=True)
    manifest = output_dir / MANIFEST
    if manifest.exists():
        changes = job_changes(srsly.read_json(manifest), job)
        if not changes:
            return
        if not force:
            raise SpacyMlmError(
                f"{output_dir} holds the output of another job: {'; '.join(changes)}. Pass --force to start "
                "over (its shards are removed), or write to a new directory"
            )
        for path in shard_files(output_dir):
            path.unlink()
    atomic_write_text(manifest, json.dumps(job, indent=2))
