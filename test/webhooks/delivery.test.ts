/**
 * Webhooks delivered to a real receiver (HTTP, with the development flag):
 * every event type the trail records and the expiry reminders, each signed
 * as the Standard Webhooks library verifies, in the order they happened,
 * with ids and names and never a key or a hash; a receiver that answers 500
 * gets the same webhook-id again until it answers 2xx, every attempt is
 * recorded, and a message whose retries run out is marked failed and can be
 * redelivered.
 */
import t from 'tap'
import type { Test } from 'tap'
import { Webhook } from 'standardwebhooks'
import { createLogger } from '@scoped/shared/logger'
import { sendKeyReminders } from '@scoped/agency-service/webhooks/outbox'
import { WebhookSender } from '@scoped/agency-service/webhooks/sender'
import type { RetrySchedule } from '@scoped/agency-service/webhooks/retry-schedule'
import { webhookEventTypes } from '@scoped/agency-service/webhooks/event-types'
import { startAgencyService } from '../agency-service/fixture.js'
import type { AgencyServiceFixture } from '../agency-service/fixture.js'
import { startWebhookReceiver } from '../helpers/webhook-receiver.js'
import type { WebhookReceiver } from '../helpers/webhook-receiver.js'
import { waitFor } from '../helpers/wait-for.js'

const FAST: RetrySchedule = { delaysMs: [30, 30], thenEveryMs: 30 }

interface Setup {
  service: AgencyServiceFixture
  receiver: WebhookReceiver
  endpointId: string
  secret: string
}

async function setup(t: Test, schedule: RetrySchedule = FAST, events: readonly string[] = webhookEventTypes): Promise<Setup> {
  const service = await startAgencyService(t, { webhookPolicy: { allowPrivateAddresses: true } })
  const receiver = await startWebhookReceiver(t)
  const created = await service.acme.post('/v1/agency/webhooks', { url: receiver.url, events })
  t.equal(created.status, 201, 'the endpoint is registered')
  const sender = new WebhookSender({
    pool: service.db.pool,
    logger: createLogger('agency-service', 'silent'),
    allowPrivateAddresses: true,
    retrySchedule: schedule,
    pollMs: 20,
    remindersEveryMs: 3_600_000,
  })
  sender.start()
  t.teardown(() => sender.stop())
  return { service, receiver, endpointId: created.item['id']!, secret: created.item['secret']! }
}

interface Payload {
  type: string
  id: string
  at: string
  data: Record<string, unknown>
}

t.test('every event type arrives in order, signed, with ids and names and never a key', async (t) => {
  const { service, receiver, secret } = await setup(t)
  const { acme } = service
  const sub = (await acme.post('/v1/agency/sub-accounts', { name: 'West' })).item
  await acme.patch(`/v1/agency/sub-accounts/${sub['id']}`, { keyRateLimit: { rate: 5, burst: 10 } })
  const keys = `/v1/agency/sub-accounts/${sub['id']}/keys`
  const expiresAt = new Date(Date.now() + 2 * 86_400_000).toISOString()
  const key = (await acme.post(keys, { name: 'crm', expiresAt })).item
  await acme.patch(`${keys}/${key['id']}`, { allowedCidrs: ['203.0.113.0/24'] })
  const rolled = (await acme.post(`${keys}/${key['id']}/roll`, {})).item
  const other = (await acme.post(keys, { name: 'billing', expiresAt })).item
  await acme.post(`${keys}/${rolled['id']}/revoke`, {})
  t.equal((await acme.delete(`${keys}/${rolled['id']}`)).status, 204)
  // The expiry reminders, on the sender's clock: 7 days ahead (at once), 1 day ahead, then expired.
  const day = 86_400_000
  t.equal(await sendKeyReminders(service.db.pool, new Date()), 1, 'the 7-day reminder of the key still due to expire')
  t.equal(await sendKeyReminders(service.db.pool, new Date()), 0, 'once')
  t.equal(await sendKeyReminders(service.db.pool, new Date(Date.now() + 1.5 * day)), 1, 'the 1-day reminder')
  t.equal(await sendKeyReminders(service.db.pool, new Date(Date.now() + 2.5 * day)), 1, 'expired')
  t.equal(await sendKeyReminders(service.db.pool, new Date(Date.now() + 2.5 * day)), 0, 'once')
  t.equal((await acme.delete(`/v1/agency/sub-accounts/${sub['id']}`)).status, 204)

  const expected = [
    'sub-account.created',
    'sub-account.updated',
    'key.created',
    'key.updated',
    'key.created', // a roll makes a new key, then records the roll
    'key.rolled',
    'key.created',
    'key.revoked',
    'key.deleted',
    'key.expiring',
    'key.expiring',
    'key.expired',
    'key.deleted', // deleting the sub-account deletes its two keys left
    'key.deleted',
    'sub-account.deleted',
  ]
  await waitFor(() => receiver.received.length >= expected.length, `${expected.length} deliveries`)
  const verifier = new Webhook(secret)
  const payloads = receiver.received.map((request) => verifier.verify(request.body, request.headers) as Payload)
  t.same(
    payloads.map((payload) => payload.type),
    expected,
    'every type, in the order of the events',
  )
  t.equal(new Set(receiver.received.map((request) => request.headers['webhook-id'])).size, expected.length, 'one webhook-id per event')
  for (const payload of payloads) {
    t.same(Object.keys(payload).sort(), ['at', 'data', 'id', 'type'], `${payload.type}: {type, id, at, data}`)
    t.match(payload.data, { agencyId: acme.tenant.agencyId }, `${payload.type}: the agency`)
  }
  t.match(payloads[2]!.data, {
    keyId: key['id'],
    keyName: 'crm',
    subAccountId: sub['id'],
    subAccountName: 'West',
    scope: 'SUB-ACCOUNT',
    actor: { kind: 'key' },
  })
  t.match(payloads.find((payload) => payload.type === 'key.expiring')?.data, { keyId: other['id'], keyName: 'billing', expiresAt })
  const everything = receiver.received.map((request) => request.body).join('\n')
  t.notMatch(everything, /sak_/, 'no key')
  t.notMatch(everything, /whsec_/, 'no secret')
  const { rows } = await service.db.pool.query<{ key_hash: string }>('SELECT key_hash FROM api_keys')
  for (const row of rows) t.notOk(everything.includes(row.key_hash), 'no hash')
  t.equal(receiver.received[0]!.headers['content-type'], 'application/json')
})

t.test('a receiver that answers 500 gets the same webhook-id again; every attempt is recorded', async (t) => {
  const { service, receiver, endpointId } = await setup(t, FAST, ['sub-account.created'])
  receiver.answer = (_request, index) => (index < 2 ? 500 : 200)
  await service.acme.post('/v1/agency/sub-accounts', { name: 'West' })
  await waitFor(() => receiver.received.length >= 3, 'three attempts')
  t.equal(new Set(receiver.received.map((request) => request.headers['webhook-id'])).size, 1, 'the same webhook-id every time')
  const deliveries = await waitFor(async () => {
    const page = await service.acme.get(`/v1/agency/webhooks/${endpointId}/deliveries`)
    return page.items.some((item) => item['state'] === 'delivered') ? page.items : undefined
  }, 'the delivered attempt recorded')
  t.same(
    deliveries.map((item) => [item['attempt'], item['state'], item['responseStatus'], item['error']]),
    [
      [3, 'delivered', 200, null],
      [2, 'failed', 500, 'answered 500'],
      [1, 'failed', 500, 'answered 500'],
    ],
    'newest first, with status and error',
  )
  for (const item of deliveries) t.match(item, { type: 'sub-account.created', eventId: String, durationMs: Number })
})

t.test('a message whose retries run out is marked failed, visibly, and can be redelivered', async (t) => {
  // Two quick retries, then the next one would fall after the 72 hours: given up.
  const { service, receiver, endpointId } = await setup(t, { delaysMs: [20, 20], thenEveryMs: 100 * 3_600_000 }, ['sub-account.created'])
  receiver.answer = () => 503
  await service.acme.post('/v1/agency/sub-accounts', { name: 'West' })
  await waitFor(async () => {
    const { rows } = await service.db.pool.query<{ state: string }>('SELECT state FROM webhook_messages')
    return rows[0]?.state === 'failed'
  }, 'the message given up')
  t.equal(receiver.received.length, 3, 'three attempts, then none')
  const page = await service.acme.get(`/v1/agency/webhooks/${endpointId}/deliveries`)
  t.same(
    page.items.map((item) => item['state']),
    ['failed', 'failed', 'failed'],
  )

  receiver.answer = () => 204
  const other = await service.globex.post(`/v1/agency/webhooks/${endpointId}/deliveries/${page.items[0]!['id']}/redeliver`, {})
  t.equal(other.status, 404, "another agency's endpoint is not found")
  const redeliver = await service.acme.post(`/v1/agency/webhooks/${endpointId}/deliveries/${page.items[0]!['id']}/redeliver`, {})
  t.equal(redeliver.status, 202)
  await waitFor(() => receiver.received.length === 4, 'the redelivery')
  t.equal(receiver.received[3]!.headers['webhook-id'], receiver.received[0]!.headers['webhook-id'], 'with the same webhook-id')
})
