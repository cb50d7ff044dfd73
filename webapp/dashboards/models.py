"""What the dashboards keep: the matrix's thresholds that operators save for everyone."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class MatrixThreshold(models.Model):
    """The good and bad boundaries of one metric that colour everyone's matrix."""

    metric = models.CharField(max_length=32, unique=True)
    good = models.FloatField()
    bad = models.FloatField()
    saved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    saved_at = models.DateTimeField()

    class Meta:
        ordering = ["metric"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(good__gte=0, bad__gte=0),
                name="matrix_threshold_not_negative",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.metric}: good {self.good:g}, bad {self.bad:g}"
