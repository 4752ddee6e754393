/**
 * The events an endpoint may subscribe to: those of the audit trail that
 * concern keys and sub-accounts (the trigger of migration 019 fans every
 * audit event out to the endpoints that asked for its type), the sender's
 * expiry reminders, and a leaked key's event.
 */
export const webhookEventTypes = [
  'key.created',
  'key.rolled',
  'key.revoked',
  'key.deleted',
  'key.updated',
  'key.expiring',
  'key.expired',
  'key.leaked',
  'sub-account.created',
  'sub-account.updated',
  'sub-account.deleted',
] as const
export type WebhookEventType = (typeof webhookEventTypes)[number]

export function isWebhookEventType(value: unknown): value is WebhookEventType {
  return typeof value === 'string' && (webhookEventTypes as readonly string[]).includes(value)
}
