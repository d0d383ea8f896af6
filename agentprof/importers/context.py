"""State shared by every file of one import: the prompt hasher (its token cache is reused across files),
the bad-line policy and the diagnostics collected on the way."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from agentprof.errors import TraceFormatError
from agentprof.trace.prompt import PromptHasher
from agentprof.trace.schema import Diagnostic


@dataclass
class ImportContext:
    """Options and shared state of one ``load_any`` call."""

    skip_bad_lines: bool = False
    hasher: PromptHasher | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    skipped_lines: int = 0
    hashed_prompts: int = 0
    exact_models: set[str] = field(default_factory=set)
    inexact_models: set[str] = field(default_factory=set)
    _unknown: Counter = field(default_factory=Counter)
    _unknown_first_line: dict = field(default_factory=dict)
    file_formats: list[tuple[str, str]] = field(default_factory=list)
    """``(file, format)`` for every input file the import reads, in the order found."""
    seen: dict[str, set] = field(default_factory=dict)
    """Per-format sets of record ids already imported from earlier files (e.g. Claude Code records a resumed
    session's file copies from the session it continues), so a copy is not counted twice."""

    def prompt_hasher(self) -> PromptHasher:
        """The hasher of this import, created on first use (loading the tokenizer costs ~0.1 s)."""
        if self.hasher is None:
            self.hasher = PromptHasher()
        return self.hasher

    def fingerprinter(self):  # -> IncrementalFingerprinter
        """A fingerprinter for one session's prompts in call order, sharing this import's token cache."""
        from agentprof.trace.fingerprint import IncrementalFingerprinter

        return IncrementalFingerprinter(self.prompt_hasher())

    def note_model(self, model: str | None) -> None:
        """Remember whether the tokenizer is exact for a model whose prompts were hashed."""
        self.hashed_prompts += 1
        key = model or ""
        if key in self.exact_models or key in self.inexact_models:
            return
        (self.exact_models if self.prompt_hasher().tokenizer.exact_for(model) else self.inexact_models).add(key)

    def bad(self, path: str, line: int | None, reason: str) -> None:
        """A record that cannot be read: raise, or skip and count it when ``skip_bad_lines`` is set."""
        if not self.skip_bad_lines:
            raise TraceFormatError(path, line, f"{reason}; use --skip-bad-lines to import the rest")
        self.skipped_lines += 1
        self.diagnostics.append(Diagnostic("bad_line", reason, path, line))

    def unknown(self, path: str, line: int | None, what: str) -> None:
        """A record kind this importer does not know (a newer agent version): counted, skipped."""
        key = (path, what)
        if key not in self._unknown:
            self._unknown_first_line[key] = line
        self._unknown[key] += 1

    def note(self, kind: str, message: str, path: str | None = None, line: int | None = None,
             span_id: str | None = None) -> None:
        self.diagnostics.append(Diagnostic(kind, message, path, line, span_id))

    def flush(self) -> list[Diagnostic]:
        """All diagnostics, with unknown record kinds summarized one line per file and kind."""
        out = list(self.diagnostics)
        for (path, what), n in sorted(self._unknown.items()):
            out.append(Diagnostic("unknown_record", f"{n} record(s) of unknown kind {what} skipped", path,
                                  self._unknown_first_line[(path, what)]))
        if self.skipped_lines:
            out.append(Diagnostic("skipped_lines", f"{self.skipped_lines} bad line(s) skipped"))
        return out
