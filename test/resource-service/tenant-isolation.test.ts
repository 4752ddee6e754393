/**
 * Every resource and verb, reached with an id of another tenant: answered
 * exactly like an id that does not exist (404), and the other tenant's data
 * is unchanged. Both a sibling sub-account of the same agency and a
 * sub-account of another agency are tried.
 */
import t from 'tap'
import type { TenantClient } from '../helpers/signed-request.js'
import { startResourceService } from './fixture.js'

const missingId = '6f1c1a5e-0000-4000-8000-000000000000'

async function seed(owner: TenantClient) {
  const agent = (await owner.post('/v1/agents', { name: 'Owner agent' })).item
  const contact = (await owner.post('/v1/contacts', { name: 'Owner contact', email: 'owner@example.com' })).item
  const call = (await owner.post('/v1/calls', { agentId: agent['id'], contactId: contact['id'] })).item
  return { agent, contact, call }
}

t.test("another tenant's ids answer 404, like ids that do not exist, and change nothing", async (t) => {
  const { alice, bob, carol } = await startResourceService(t)
  const owned = await seed(alice)
  const changes = {
    agents: { name: 'Taken over' },
    contacts: { name: 'Taken over' },
    calls: { status: 'failed' },
  }
  const items = { agents: owned.agent, contacts: owned.contact, calls: owned.call }

  for (const [intruderName, intruder] of [
    ['a sibling sub-account', bob],
    ['a sub-account of another agency', carol],
  ] as const) {
    for (const resource of ['agents', 'contacts', 'calls'] as const) {
      const id = items[resource]['id']!
      const noun = { agents: 'Agent', contacts: 'Contact', calls: 'Call' }[resource]
      const notFound = { success: false, message: `${noun} not found` }
      const attempts = [
        ['GET', () => intruder.get(`/v1/${resource}/${id}`), () => intruder.get(`/v1/${resource}/${missingId}`)],
        ['PATCH', () => intruder.patch(`/v1/${resource}/${id}`, changes[resource]), () => intruder.patch(`/v1/${resource}/${missingId}`, changes[resource])],
        ['DELETE', () => intruder.delete(`/v1/${resource}/${id}`), () => intruder.delete(`/v1/${resource}/${missingId}`)],
      ] as const
      for (const [verb, foreign, missing] of attempts) {
        const name = `${intruderName}: ${verb} /v1/${resource}/:id`
        const [foreignResponse, missingResponse] = [await foreign(), await missing()]
        t.equal(foreignResponse.status, 404, name)
        t.same(foreignResponse.json, notFound, name)
        t.equal(foreignResponse.text, missingResponse.text, `${name}: the same answer as an id that does not exist`)
      }
      const list = await intruder.get(`/v1/${resource}`)
      t.same(list.items, [], `${intruderName}: GET /v1/${resource} shows none of the owner's rows`)
    }
    const created = await intruder.post('/v1/calls', { agentId: owned.agent['id'], contactId: owned.contact['id'] })
    t.equal(created.status, 400, `${intruderName}: POST /v1/calls with the owner's agent and contact`)
    t.same(created.json, { success: false, message: 'body.agentId does not name an agent of this sub-account' })
  }

  t.same((await alice.get(`/v1/agents/${owned.agent['id']}`)).item, owned.agent, "the owner's agent is unchanged")
  t.same((await alice.get(`/v1/contacts/${owned.contact['id']}`)).item, owned.contact, "the owner's contact is unchanged")
  t.same((await alice.get(`/v1/calls/${owned.call['id']}`)).item, owned.call, "the owner's call is unchanged")
  for (const resource of ['agents', 'contacts', 'calls']) {
    t.equal((await alice.get(`/v1/${resource}`)).items.length, 1, `the owner still has exactly one of ${resource}`)
  }
})

t.test('ids that are not UUIDs answer 404', async (t) => {
  const { alice } = await startResourceService(t)
  for (const resource of ['agents', 'contacts', 'calls']) {
    for (const id of ['123', 'not-a-uuid', `${missingId}x`, "1' OR '1'='1", 'urn:uuid:6f1c1a5e-0000-4000-8000-000000000000']) {
      const path = `/v1/${resource}/${encodeURIComponent(id)}`
      t.equal((await alice.get(path)).status, 404, `GET ${path}`)
      t.equal((await alice.patch(path, resource === 'calls' ? { status: 'failed' } : { name: 'x' })).status, 404, `PATCH ${path}`)
      t.equal((await alice.delete(path)).status, 404, `DELETE ${path}`)
    }
  }
})

t.test("a call can reference only its own sub-account's agent and contact", async (t) => {
  const { alice, carol } = await startResourceService(t)
  const own = await seed(alice)
  const foreign = await seed(carol)

  const cases = [
    ['a foreign agent', { agentId: foreign.agent['id'], contactId: own.contact['id'] }, 'body.agentId does not name an agent of this sub-account'],
    ['a foreign contact', { agentId: own.agent['id'], contactId: foreign.contact['id'] }, 'body.contactId does not name a contact of this sub-account'],
    ['an agent that does not exist', { agentId: missingId, contactId: own.contact['id'] }, 'body.agentId does not name an agent of this sub-account'],
    ['a contact that does not exist', { agentId: own.agent['id'], contactId: missingId }, 'body.contactId does not name a contact of this sub-account'],
    ['an agent id given as a contact', { agentId: own.agent['id'], contactId: own.agent['id'] }, 'body.contactId does not name a contact of this sub-account'],
  ] as const
  for (const [name, body, message] of cases) {
    const created = await alice.post('/v1/calls', body)
    t.equal(created.status, 400, `create with ${name}`)
    t.same(created.json, { success: false, message }, `create with ${name}`)
  }
  const moved = await alice.patch(`/v1/calls/${own.call['id']}`, { agentId: foreign.agent['id'] })
  t.equal(moved.status, 400, 'update to a foreign agent')
  t.same(moved.json, { success: false, message: 'body.agentId does not name an agent of this sub-account' })

  t.same((await alice.get(`/v1/calls/${own.call['id']}`)).item, own.call, 'the call is unchanged')
  t.equal((await alice.get('/v1/calls')).items.length, 1, 'no call was created')
  t.same((await carol.get(`/v1/calls/${foreign.call['id']}`)).item, foreign.call, "the other tenant's call is unchanged")
})
