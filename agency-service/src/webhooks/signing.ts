/**
 * Standard Webhooks signing (https://www.standardwebhooks.com): the
 * `webhook-signature` header is `v1,` and the base64 HMAC-SHA256, under the
 * endpoint's secret, of `<webhook-id>.<webhook-timestamp>.<body>`. The
 * reference library signs, so receivers verifying with it agree byte for byte.
 */
import { randomBytes } from 'node:crypto'
import { Webhook } from 'standardwebhooks'

const SECRET_PREFIX = 'whsec_'

/** A new endpoint secret: 32 random bytes, base64, after `whsec_`. */
export function newEndpointSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64')
}

/** The three Standard Webhooks headers of one attempt. */
export function signedHeaders(secret: string, messageId: string, at: Date, body: string): Record<string, string> {
  return {
    'webhook-id': messageId,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign(messageId, at, body),
  }
}
