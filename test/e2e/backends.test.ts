/**
 * The backends through the whole stack as processes: two gateway replicas
 * over HTTPS in front of agency-service and resource-service, sharing one
 * Postgres and one Redis. The key alone decides the tenant; deleting a
 * sub-account through the API makes its keys fail on the very next request,
 * on every replica.
 */
import t from 'tap'
import type { Test } from 'tap'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import type { HttpsClient, HttpsResponse } from '../helpers/https.js'
import { httpsClient } from '../helpers/https.js'
import { startStack } from '../helpers/stack.js'

interface BackendsStack {
  replicas: HttpsClient[]
  keys: KeyService
  agencyA: { id: string; key: string; west: string; westKey: string; east: string; eastKey: string }
  agencyB: { id: string; key: string; north: string; northKey: string }
}

async function startBackendsStack(t: Test): Promise<BackendsStack> {
  const { db, gatewayPorts, cert } = await startStack(t, 2)
  const replicas = gatewayPorts.map((port) => httpsClient(t, port, cert, { openapi: true }))

  // Keys are made as the operator would; creating one never needs to invalidate anything.
  const keys = new KeyService(db.pool, new KeyRevocationNotifier(db.pool, null))
  const tenants = new TenantStore(db.pool)
  const a = await tenants.createAgency('Agency A')
  const b = await tenants.createAgency('Agency B')
  const west = await tenants.createSubAccount(a.id, 'A West')
  const east = await tenants.createSubAccount(a.id, 'A East')
  const north = await tenants.createSubAccount(b.id, 'B North')
  const key = async (owner: Parameters<KeyService['create']>[0]) => (await keys.create(owner, 'e2e', 'test')).key
  return {
    replicas,
    keys,
    agencyA: {
      id: a.id,
      key: await key({ scope: 'AGENCY', agencyId: a.id }),
      west: west.id,
      westKey: await key({ scope: 'SUB-ACCOUNT', subAccountId: west.id }),
      east: east.id,
      eastKey: await key({ scope: 'SUB-ACCOUNT', subAccountId: east.id }),
    },
    agencyB: {
      id: b.id,
      key: await key({ scope: 'AGENCY', agencyId: b.id }),
      north: north.id,
      northKey: await key({ scope: 'SUB-ACCOUNT', subAccountId: north.id }),
    },
  }
}

function call(client: HttpsClient, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, key: string, body?: unknown): Promise<HttpsResponse> {
  const headers: Record<string, string> = { authorization: `Bearer ${key}` }
  if (body !== undefined) headers['content-type'] = 'application/json'
  return client.request(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
}

t.test('the backends through the gateway', async (t) => {
  const stack = await startBackendsStack(t)
  const [one, two] = stack.replicas as [HttpsClient, HttpsClient]
  const { agencyA, agencyB } = stack

  await t.test("GET /v1/agents answers success, data and pagination for the key's sub-account only", async (t) => {
    const westAgent = await call(one, 'POST', '/v1/agents', agencyA.westKey, { name: 'West agent', sub_account_id: agencyA.east })
    t.equal(westAgent.status, 201, 'a tenant named in the body is stripped by the gateway, never taken')
    const eastAgent = await call(two, 'POST', '/v1/agents', agencyA.eastKey, { name: 'East agent' })
    t.equal(eastAgent.status, 201)
    await call(one, 'POST', '/v1/agents', agencyB.northKey, { name: 'North agent' })

    for (const client of [one, two]) {
      const list = await call(client, 'GET', '/v1/agents', agencyA.westKey)
      t.equal(list.status, 200)
      t.same(list.json, {
        success: true,
        data: [westAgent.json.data],
        pagination: { limit: 20, nextCursor: null, hasMore: false },
      })
    }
    const tampered = await call(one, 'GET', `/v1/agents?sub_account_id=${agencyA.east}&limit=5`, agencyA.westKey)
    t.equal(tampered.status, 200, 'a tenant named in the query is stripped too')
    t.same(
      tampered.json.data.map((agent: { name: string }) => agent.name),
      ['West agent'],
    )
    const foreign = await call(one, 'GET', `/v1/agents/${eastAgent.json.data.id}`, agencyA.westKey)
    t.equal(foreign.status, 404, "another sub-account's agent does not exist for this key")
    t.same(foreign.json, { success: false, message: 'Agent not found' })
    const contacts = await call(one, 'GET', '/v1/contacts', agencyA.westKey)
    t.match(contacts.json, { success: true, data: [], pagination: { limit: 20, hasMore: false } })
  })

  await t.test('an agency key reaches its own agency and only its own sub-accounts', async (t) => {
    const agency = await call(one, 'GET', '/v1/agency', agencyA.key)
    t.equal(agency.status, 200)
    t.match(agency.json, { success: true, data: { id: agencyA.id, name: 'Agency A' } })
    const list = await call(two, 'GET', '/v1/agency/sub-accounts', agencyA.key)
    t.equal(list.status, 200)
    t.same(list.json.data.map((sub: { id: string }) => sub.id).sort(), [agencyA.west, agencyA.east].sort())
    t.match(list.json.pagination, { limit: 20, hasMore: false, nextCursor: null })
    const foreign = await call(one, 'GET', `/v1/agency/sub-accounts/${agencyB.north}`, agencyA.key)
    t.equal(foreign.status, 404)
    t.same(
      (await call(one, 'GET', '/v1/agency/sub-accounts', agencyB.key)).json.data.map((sub: { id: string }) => sub.id),
      [agencyB.north],
    )
  })

  await t.test('each key stays in its scope', async (t) => {
    const subOnAgency = await call(one, 'GET', '/v1/agency/sub-accounts', agencyA.westKey)
    t.equal(subOnAgency.status, 403)
    const agencyOnAgents = await call(one, 'GET', '/v1/agents', agencyA.key)
    t.equal(agencyOnAgents.status, 403)
  })

  await t.test('deleting a sub-account through the gateway makes its keys fail (401) on the very next request, on every replica', async (t) => {
    // Warm both replicas' caches with the key about to go.
    for (const client of [one, two]) {
      t.equal((await call(client, 'GET', '/v1/agents', agencyA.westKey)).status, 200)
      t.equal((await call(client, 'GET', '/v1/agents', agencyA.westKey)).status, 200)
    }
    const deleted = await call(one, 'DELETE', `/v1/agency/sub-accounts/${agencyA.west}`, agencyA.key)
    t.equal(deleted.status, 204)
    const [onOne, onTwo] = await Promise.all([call(one, 'GET', '/v1/agents', agencyA.westKey), call(two, 'GET', '/v1/agents', agencyA.westKey)])
    for (const response of [onOne, onTwo]) {
      t.equal(response.status, 401)
      t.same(response.json, { success: false, message: 'Invalid or revoked API key' })
    }
    t.equal((await call(two, 'GET', '/v1/agents', agencyA.eastKey)).status, 200, "the sibling sub-account's key still works")
    t.equal((await call(two, 'GET', '/v1/agency', agencyA.key)).status, 200, "the agency's key still works")
    t.same(
      (await call(two, 'GET', '/v1/agency/sub-accounts', agencyA.key)).json.data.map((sub: { id: string }) => sub.id),
      [agencyA.east],
    )
  })
})
