"""What the accounts app announces beyond Django's model signals."""

from django.dispatch import Signal

# Sent once API tokens were revoked, with ``user_ids``: their owners. Revoking is a queryset
# update, which sends no ``post_save``; listeners (open live connections) must still learn it.
tokens_revoked = Signal()
