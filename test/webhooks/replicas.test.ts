/**
 * Several senders, one delivery: agency-service as operators run it is
 * stopped with SIGTERM while a delivery is in flight; it records the answer
 * before it exits, and the replica that carries on does not send that event
 * again. The start line says when the development flag is on.
 */
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { createLogger } from '@scoped/shared/logger'
import { TenantStore } from '@scoped/agency-service/tenants'
import { WebhookSender } from '@scoped/agency-service/webhooks/sender'
import { WebhookStore } from '@scoped/agency-service/webhooks/webhook-store'
import { createTestDatabase } from '../helpers/database.js'
import { freePort, startProcess } from '../helpers/processes.js'
import { startWebhookReceiver } from '../helpers/webhook-receiver.js'
import { waitFor } from '../helpers/wait-for.js'

t.test('a replica SIGTERMed mid-delivery records it, and no other replica sends it again', async (t) => {
  const db = await createTestDatabase(t)
  const tenants = new TenantStore(db.pool)
  const agency = await tenants.createAgency('Acme')
  const receiver = await startWebhookReceiver(t)
  await new WebhookStore(db.pool).create(agency.id, receiver.url, ['sub-account.created'])
  let release: (status: number) => void = () => undefined
  receiver.answer = (_request, index) => (index === 0 ? new Promise<number>((resolve) => (release = resolve)) : 200)

  const service = await startProcess(
    t,
    'agency-service/src/main.ts',
    {
      DATABASE_URL: db.url,
      TENANT_SIGNING_SECRET: randomBytes(24).toString('hex'),
      AGENCY_SERVICE_PORT: String(await freePort()),
      WEBHOOK_ALLOW_PRIVATE_ADDRESSES: '1',
    },
    /agency-service ready/,
  )
  t.match(service.output(), /WEBHOOK_ALLOW_PRIVATE_ADDRESSES=1: webhooks may go to http:\/\//, 'the start says the flag is on')
  await tenants.createSubAccount(agency.id, 'West', 'test')
  await waitFor(() => receiver.received.length === 1, 'the first delivery in flight')

  service.child.kill('SIGTERM')
  await waitFor(() => /agency-service stopping/.test(service.output()), 'the replica stopping')
  release(200)
  t.equal(await service.exited, 0, 'it exits 0 once the delivery is recorded')

  // The replica that carries on, and a second event behind the first.
  const sender = new WebhookSender({ pool: db.pool, logger: createLogger('agency-service', 'silent'), allowPrivateAddresses: true, pollMs: 20 })
  sender.start()
  t.teardown(() => sender.stop())
  await tenants.createSubAccount(agency.id, 'East', 'test')
  await waitFor(() => receiver.received.length >= 2, 'the second event')
  // Deliveries are in order per endpoint: the second went out only after the first was settled.
  const names = receiver.received.map((request) => (JSON.parse(request.body) as { data: { subAccountName: string } }).data.subAccountName)
  t.same(names, ['West', 'East'], 'each event once, in order')
  // The receiver has the second request before the sender has recorded its answer: wait for the record.
  const messages = async () => (await db.pool.query<{ attempts: number; state: string }>(`SELECT attempts, state FROM webhook_messages ORDER BY seq`)).rows
  const rows = await waitFor(async () => {
    const current = await messages()
    return current.every((row) => row.state !== 'pending') && current
  }, 'both messages settled')
  t.same(rows, [
    { attempts: 1, state: 'delivered' },
    { attempts: 1, state: 'delivered' },
  ])
})
