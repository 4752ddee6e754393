/**
 * A method a path does not take, through the whole stack over HTTPS: the
 * service behind the gateway answers 405 with `Allow` naming the methods the
 * path does take (after the key and its scope are checked, like any request
 * to the path), and the gateway's own 405, for a method it never forwards,
 * names every method it forwards. An unknown path stays 404. Every response
 * is checked against the served API description, as the document promises.
 */
import t from 'tap'
import type { Test } from 'tap'
import { errorCatalog } from '@scoped/shared/errors'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import type { HttpsResponse } from '../helpers/https.js'
import { httpsClient } from '../helpers/https.js'
import { startStack } from '../helpers/stack.js'

const stack = await startStack(t)
const client = httpsClient(t, stack.gatewayPorts[0]!, stack.cert, { openapi: true })
const keys = new KeyService(stack.db.pool, new KeyRevocationNotifier(stack.db.pool, null))
const tenants = new TenantStore(stack.db.pool)
const acme = await tenants.createAgency('Acme')
const west = await tenants.createSubAccount(acme.id, 'Acme West')
const agencyKey = await keys.create({ scope: 'AGENCY', agencyId: acme.id }, 'acme automation', 'ctl:ops')
const subKey = await keys.create({ scope: 'SUB-ACCOUNT', subAccountId: west.id }, 'west', 'ctl:ops')

function send(method: 'GET' | 'PUT' | 'DELETE' | 'POST' | 'PATCH', path: string, key?: string): Promise<HttpsResponse> {
  return client.request(path, { method, headers: key === undefined ? {} : { authorization: `Bearer ${key}` } })
}

function expect405(t: Test, response: HttpsResponse, allow: string): void {
  t.equal(response.status, 405)
  t.same(response.json, { success: false, message: errorCatalog.methodNotAllowed.message })
  t.equal(response.headers['allow'], allow)
}

t.test('the service: 405 with the methods the path takes', async (t) => {
  const agent = await client.request('/v1/agents', {
    method: 'POST',
    headers: { authorization: `Bearer ${subKey.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'Ada' }),
  })
  t.equal(agent.status, 201)
  const id = (agent.json as { data: { id: string } }).data.id
  expect405(t, await send('PUT', `/v1/agents/${id}`, subKey.key), 'DELETE, GET, HEAD, PATCH')
  expect405(t, await send('DELETE', '/v1/agents', subKey.key), 'GET, HEAD, POST')
  expect405(t, await send('PUT', '/v1/agency', agencyKey.key), 'GET, HEAD')
  expect405(t, await send('GET', `/v1/agency/sub-accounts/${west.id}/keys/${subKey.id}/revoke`, agencyKey.key), 'POST')
  t.equal((await send('GET', `/v1/agents/${id}`, subKey.key)).status, 200, 'the path itself is there')
})

t.test('only for a caller the path is for: the key and its scope first', async (t) => {
  t.equal((await send('PUT', '/v1/agents/1')).status, 401, 'no key: 401')
  t.equal((await send('PUT', '/v1/agents/1', agencyKey.key)).status, 403, 'a key of the other scope: 403')
  const unknown = await send('PUT', '/v1/agents/1/nothing', subKey.key)
  t.equal(unknown.status, 404, 'an unknown path: 404')
  t.equal(unknown.headers['allow'], undefined)
})

t.test("the gateway's own 405: a method it never forwards", async (t) => {
  const response = await client.request('/v1/agents', { method: 'TRACE' as 'GET', headers: { authorization: `Bearer ${subKey.key}` } })
  expect405(t, response, 'DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT')
})
