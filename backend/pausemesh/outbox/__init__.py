"""The outbox: deliveries queued with a state change, claimed, sent and settled (one loop for
every channel: A2A push notifications and the event webhooks)."""
