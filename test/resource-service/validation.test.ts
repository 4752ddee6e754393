import t from 'tap'
import { request } from '../helpers/signed-request.js'
import { startResourceService } from './fixture.js'

t.test('invalid bodies are refused with 400 naming the field, and nothing is stored', async (t) => {
  const { alice } = await startResourceService(t)
  const agent = (await alice.post('/v1/agents', { name: 'Ada' })).item
  const contact = (await alice.post('/v1/contacts', { name: 'Grace' })).item
  const call = (await alice.post('/v1/calls', { agentId: agent['id'], contactId: contact['id'] })).item

  const cases: Array<[string, 'POST' | 'PATCH', string, unknown, string]> = [
    ['agent without a name', 'POST', '/v1/agents', {}, 'body.name is required'],
    ['agent name of the wrong type', 'POST', '/v1/agents', { name: 123 }, 'body.name must be string'],
    ['agent name null', 'POST', '/v1/agents', { name: null }, 'body.name must be string'],
    ['agent name empty', 'POST', '/v1/agents', { name: '' }, 'body.name must NOT have fewer than 1 characters'],
    ['agent name blank', 'POST', '/v1/agents', { name: '   ' }, 'body.name must be 1 to 200 printable characters'],
    ['agent name with a control character', 'POST', '/v1/agents', { name: 'a\u0007b' }, 'body.name must be 1 to 200 printable characters'],
    ['agent name too long', 'POST', '/v1/agents', { name: 'x'.repeat(201) }, 'body.name must NOT have more than 200 characters'],
    ['agent with an unknown field', 'POST', '/v1/agents', { name: 'a', colour: 'red' }, 'body.colour is not allowed'],
    ['agent body that is an array', 'POST', '/v1/agents', [{ name: 'a' }], 'body must be object'],
    ['agent body that is a string', 'POST', '/v1/agents', 'Ada', 'body must be object'],
    ['empty agent update', 'PATCH', `/v1/agents/${agent['id']}`, {}, 'body must contain at least one field to change'],
    ['agent update to a blank name', 'PATCH', `/v1/agents/${agent['id']}`, { name: ' ' }, 'body.name must be 1 to 200 printable characters'],
    ['contact without a name', 'POST', '/v1/contacts', { email: 'a@example.com' }, 'body.name is required'],
    ['contact with a bad email', 'POST', '/v1/contacts', { name: 'a', email: 'not an email' }, 'body.email must match format "email"'],
    ['contact with an email of the wrong type', 'POST', '/v1/contacts', { name: 'a', email: 5 }, 'body.email must be string,null'],
    ['contact with a bad phone', 'POST', '/v1/contacts', { name: 'a', phone: '555-0100' }, 'body.phone must match pattern "^\\+[1-9][0-9]{1,14}$"'],
    ['empty contact update', 'PATCH', `/v1/contacts/${contact['id']}`, {}, 'body must contain at least one field to change'],
    ['contact update with a bad phone', 'PATCH', `/v1/contacts/${contact['id']}`, { phone: '+0' }, 'body.phone must match pattern "^\\+[1-9][0-9]{1,14}$"'],
    ['call without an agent', 'POST', '/v1/calls', { contactId: contact['id'] }, 'body.agentId is required'],
    ['call without a contact', 'POST', '/v1/calls', { agentId: agent['id'] }, 'body.contactId is required'],
    ['call with an agent id that is not a UUID', 'POST', '/v1/calls', { agentId: 'agent-1', contactId: contact['id'] }, 'body.agentId must be a UUID'],
    [
      'call with a URN for an agent id',
      'POST',
      '/v1/calls',
      { agentId: `urn:uuid:${agent['id']}`, contactId: contact['id'] },
      'body.agentId must NOT have more than 36 characters',
    ],
    [
      'call with an unknown status',
      'POST',
      '/v1/calls',
      { agentId: agent['id'], contactId: contact['id'], status: 'ringing' },
      'body.status must be equal to one of the allowed values',
    ],
    ['empty call update', 'PATCH', `/v1/calls/${call['id']}`, {}, 'body must contain at least one field to change'],
    ['call update to an unknown status', 'PATCH', `/v1/calls/${call['id']}`, { status: 'QUEUED' }, 'body.status must be equal to one of the allowed values'],
    ['call update with a sub_account_id', 'PATCH', `/v1/calls/${call['id']}`, { status: 'failed', sub_account_id: 'x' }, 'body.sub_account_id is not allowed'],
  ]
  for (const [name, method, path, body, message] of cases) {
    const response = method === 'POST' ? await alice.post(path, body) : await alice.patch(path, body)
    t.equal(response.status, 400, name)
    t.same(response.json, { success: false, message }, name)
  }

  for (const path of [`/v1/agents/${agent['id']}?expand=calls`, `/v1/calls/${call['id']}?sub_account_id=x`]) {
    const response = await alice.get(path)
    t.equal(response.status, 400, `unknown query parameters on ${path}`)
    t.match(response.json, { success: false, message: /^querystring\.[a-z_]+ is not allowed$/ })
  }

  t.same((await alice.get('/v1/agents')).items, [agent], 'no agent was created or changed')
  t.same((await alice.get('/v1/contacts')).items, [contact], 'no contact was created or changed')
  t.same((await alice.get('/v1/calls')).items, [call], 'no call was created or changed')
})

t.test('bodies that are not JSON objects are refused in the envelope', async (t) => {
  const { baseUrl, secret, alice } = await startResourceService(t)
  const signing = { secret, tenant: alice.tenant }
  const broken = await request(baseUrl, 'POST', '/v1/agents', { rawBody: '{"name":', signing })
  t.equal(broken.status, 400)
  t.same(broken.json, { success: false, message: 'Request body is not valid JSON' })

  const form = await request(baseUrl, 'POST', '/v1/agents', { rawBody: 'name=Ada', headers: { 'content-type': 'application/x-www-form-urlencoded' }, signing })
  t.equal(form.status, 415)
  t.same(form.json, { success: false, message: 'Unsupported content type' })

  const missing = await request(baseUrl, 'POST', '/v1/agents', { signing })
  t.equal(missing.status, 400)
  t.same(missing.json, { success: false, message: 'body must be object' })

  const huge = await request(baseUrl, 'POST', '/v1/agents', { body: { name: 'x'.repeat(200 * 1024) }, signing })
  t.equal(huge.status, 413)
  t.same(huge.json, { success: false, message: 'Request body is too large' })
  t.same((await alice.get('/v1/agents')).items, [])
})
