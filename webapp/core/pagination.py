from rest_framework.pagination import LimitOffsetPagination as DRFLimitOffsetPagination


class LimitOffsetPagination(DRFLimitOffsetPagination):
    """?limit=&offset= pages of PAGE_SIZE (50) items; a client may ask for at most 500."""

    max_limit = 500
