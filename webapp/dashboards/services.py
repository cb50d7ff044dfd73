"""The dashboards' writes: an operator's thresholds for everyone's matrix."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from webapp.accounts.roles import User
from webapp.dashboards.models import MatrixThreshold
from webapp.dashboards.selectors.thresholds import threshold_errors


def matrix_threshold_save(
    *, metric: str, good: float, bad: float, user: User | None
) -> tuple[MatrixThreshold, bool]:
    """Save the metric's thresholds for everyone: (the row, whether it is new). Boundaries
    that threshold_errors refuses raise ValidationError and change nothing."""
    errors = threshold_errors(metric=metric, good=good, bad=bad)
    if errors:
        raise ValidationError(errors)
    saved_by_id = user.pk if user is not None and user.is_authenticated else None
    with transaction.atomic():
        return MatrixThreshold.objects.update_or_create(
            metric=metric,
            defaults={
                "good": good,
                "bad": bad,
                "saved_by_id": saved_by_id,
                "saved_at": timezone.now(),
            },
        )


def matrix_threshold_reset(*, metric: str) -> bool:
    """Back to the defaults: whether there was a saved row to remove."""
    deleted, _ = MatrixThreshold.objects.filter(metric=metric).delete()
    return deleted > 0
