"""One piece of advice: a question, its answer in words, and what the answer rests on.

Plain data (no Django): the selectors make statements from runs, the API and the pages show
them. `to_json` gives the API's fields (design.md, "Answers")."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

QUESTIONS = (
    "crossover",
    "knee",
    "latency-hiding",
    "read-ahead",
    "cache",
    "redirector",
    # Beyond reads (issue 20): a third-party copy's direction, IPv4 against IPv6.
    "tpc-direction",
    "address-family",
)
TOO_THIN = "too-thin"


@dataclass(frozen=True)
class Statement:
    """The answer to one question for one endpoint, vantage point and scope.

    `verdict` is one word per question (crossover: copy-first | read-directly | crossover |
    no-difference; knee: knee | scales | flat; latency-hiding: pays-off | no-gain;
    read-ahead: helps | only-moves-bytes | no-difference; cache: helps | no-gain;
    redirector: cheap | costly | no-difference; tpc-direction: pull-faster | push-faster |
    no-difference; address-family: ipv6-slower | ipv4-slower | no-difference), or
    "too-thin" when there is not enough data, and then `suggested_campaign` says what
    campaign would collect it. The knee is also of writes and metadata storms: its
    `scope["operation"]` says whose (read, write, stat, open, list)."""

    question: str
    verdict: str
    text: str
    endpoint_id: int
    vantage_point_id: int | None
    protocol: str = ""
    scope: dict[str, Any] = field(default_factory=dict)
    value: float | None = None
    unit: str = ""
    interval: tuple[float, float] | None = None
    model_prediction: float | None = None
    model_text: str = ""
    # Whether the model's prediction agrees with the runs (within answers.TOLERANCE), by the
    # rule that writes model_text: None when the model predicts nothing here.
    model_agrees: bool | None = None
    evidence: list[int] = field(default_factory=list)
    measured_at: datetime | None = None
    stale: bool = False
    enough_data: bool = True
    suggested_campaign: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The statement as the API gives it."""
        return {
            "question": self.question,
            "verdict": self.verdict,
            "text": self.text,
            "endpoint": self.endpoint_id,
            "vantage_point": self.vantage_point_id,
            "protocol": self.protocol,
            "scope": dict(self.scope),
            "value": self.value,
            "unit": self.unit,
            "interval": list(self.interval) if self.interval is not None else None,
            "model_prediction": self.model_prediction,
            "model_text": self.model_text,
            "model_agrees": self.model_agrees,
            "evidence": list(self.evidence),
            "measured_at": self.measured_at.isoformat() if self.measured_at else None,
            "stale": self.stale,
            "enough_data": self.enough_data,
            "suggested_campaign": self.suggested_campaign,
        }
