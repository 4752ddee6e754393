import t from 'tap'
import { startResourceService } from './fixture.js'

t.test('agents: create, read, list, update, delete', async (t) => {
  const { alice } = await startResourceService(t)
  const created = await alice.post('/v1/agents', { name: '  Ada  ' })
  t.equal(created.status, 201)
  t.equal(created.json.success, true)
  t.match(created.item, { id: /^[0-9a-f-]{36}$/, name: 'Ada', createdAt: String, updatedAt: String }, 'the name is trimmed')
  t.same(Object.keys(created.item).sort(), ['createdAt', 'id', 'name', 'updatedAt'])
  const id = created.item['id']!

  const read = await alice.get(`/v1/agents/${id}`)
  t.equal(read.status, 200)
  t.same(read.json, { success: true, data: created.item })

  const list = await alice.get('/v1/agents')
  t.equal(list.status, 200)
  t.same(list.json, { success: true, data: [created.item], pagination: { limit: 20, nextCursor: null, hasMore: false } })

  const updated = await alice.patch(`/v1/agents/${id}`, { name: 'Ada L.' })
  t.equal(updated.status, 200)
  t.match(updated.item, { id, name: 'Ada L.', createdAt: created.item['createdAt'] })
  t.ok(updated.item['updatedAt']! >= created.item['updatedAt']!)
  t.same((await alice.get(`/v1/agents/${id}`)).item, updated.item, 'the update is stored')

  const deleted = await alice.delete(`/v1/agents/${id}`)
  t.equal(deleted.status, 204)
  t.equal(deleted.text, '')
  const gone = await alice.get(`/v1/agents/${id}`)
  t.equal(gone.status, 404)
  t.same(gone.json, { success: false, message: 'Agent not found' })
  t.equal((await alice.delete(`/v1/agents/${id}`)).status, 404, 'deleting twice finds nothing the second time')
})

t.test('contacts: optional email and phone, cleared with null', async (t) => {
  const { alice } = await startResourceService(t)
  const bare = await alice.post('/v1/contacts', { name: 'Grace' })
  t.equal(bare.status, 201)
  t.match(bare.item, { name: 'Grace', email: null, phone: null })

  const full = await alice.post('/v1/contacts', { name: 'Linus', email: 'linus@example.com', phone: '+14155550100' })
  t.equal(full.status, 201)
  t.match(full.item, { name: 'Linus', email: 'linus@example.com', phone: '+14155550100' })
  const id = full.item['id']!

  const cleared = await alice.patch(`/v1/contacts/${id}`, { email: null })
  t.equal(cleared.status, 200)
  t.match(cleared.item, { name: 'Linus', email: null, phone: '+14155550100' }, 'only the named field changes')

  const list = await alice.get('/v1/contacts')
  t.same(
    list.items.map((item) => item['id']),
    [bare.item['id'], id],
  )
  t.equal((await alice.delete(`/v1/contacts/${id}`)).status, 204)
  t.equal((await alice.get(`/v1/contacts/${id}`)).status, 404)
})

t.test('calls: between an agent and a contact, status defaults to queued', async (t) => {
  const { alice } = await startResourceService(t)
  const agent = (await alice.post('/v1/agents', { name: 'Ada' })).item
  const contact = (await alice.post('/v1/contacts', { name: 'Grace' })).item
  const call = await alice.post('/v1/calls', { agentId: agent['id'], contactId: contact['id'] })
  t.equal(call.status, 201)
  t.match(call.item, { agentId: agent['id'], contactId: contact['id'], status: 'queued' })
  const id = call.item['id']!

  const progressed = await alice.patch(`/v1/calls/${id}`, { status: 'in-progress' })
  t.equal(progressed.status, 200)
  t.match(progressed.item, { status: 'in-progress' })

  const otherAgent = (await alice.post('/v1/agents', { name: 'Alan' })).item
  const moved = await alice.patch(`/v1/calls/${id}`, { agentId: otherAgent['id'], status: 'completed' })
  t.match(moved.item, { agentId: otherAgent['id'], status: 'completed' })

  t.equal((await alice.get(`/v1/calls/${id}`)).item['status'], 'completed')
  t.equal((await alice.get('/v1/calls')).items.length, 1)
})

t.test('an agent or contact that calls still use cannot be deleted', async (t) => {
  const { alice } = await startResourceService(t)
  const agent = (await alice.post('/v1/agents', { name: 'Ada' })).item
  const contact = (await alice.post('/v1/contacts', { name: 'Grace' })).item
  const call = (await alice.post('/v1/calls', { agentId: agent['id'], contactId: contact['id'] })).item

  const agentInUse = await alice.delete(`/v1/agents/${agent['id']}`)
  t.equal(agentInUse.status, 409)
  t.same(agentInUse.json, { success: false, message: 'Agent has calls; delete them first' })
  const contactInUse = await alice.delete(`/v1/contacts/${contact['id']}`)
  t.equal(contactInUse.status, 409)
  t.same(contactInUse.json, { success: false, message: 'Contact has calls; delete them first' })

  t.equal((await alice.delete(`/v1/calls/${call['id']}`)).status, 204)
  t.equal((await alice.delete(`/v1/agents/${agent['id']}`)).status, 204)
  t.equal((await alice.delete(`/v1/contacts/${contact['id']}`)).status, 204)
})

t.test('health probes answer without a signature; unknown routes answer 404 in the envelope', async (t) => {
  const { baseUrl, alice } = await startResourceService(t)
  const live = await fetch(`${baseUrl}/healthz`)
  t.equal(live.status, 200)
  t.same(await live.json(), { success: true, data: { status: 'live' } })
  const ready = await fetch(`${baseUrl}/readyz`)
  t.equal(ready.status, 200)
  t.same(await ready.json(), { success: true, data: { status: 'ready' } })

  for (const path of ['/v1/unknown', '/v1/agents/x/y', '/', '/v1/agency']) {
    const response = await alice.get(path)
    t.equal(response.status, 404, path)
    t.same(response.json, { success: false, message: 'Not found' }, path)
    t.match(response.headers.get('content-type'), /^application\/json/)
  }
  // A method the path does not take: 405 with the methods it does (RFC 9110 asks for Allow).
  const put = await alice.patch('/v1/agents', { name: 'x' })
  t.equal(put.status, 405, 'a verb the resource does not have')
  t.same(put.json, { success: false, message: 'Method not allowed' })
  t.equal(put.headers.get('allow'), 'GET, HEAD, POST', 'and the ones it has')
})
