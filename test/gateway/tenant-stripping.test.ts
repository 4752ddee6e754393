import t from 'tap'
import { isTenantField, stripTenantFields, stripTenantQuery } from '@scoped/gateway/tenant-stripping'

const queries: Array<[string, string, string]> = [
  ['empty', '', ''],
  ['nothing to strip', 'limit=5&cursor=abc', 'limit=5&cursor=abc'],
  ['kept byte for byte', 'a=%20x+y&b=%2F&c', 'a=%20x+y&b=%2F&c'],
  ['agency_id', 'agency_id=1', ''],
  ['sub_account_id in the middle', 'limit=5&sub_account_id=2&cursor=c', 'limit=5&cursor=c'],
  ['both, with others around', 'agency_id=1&x=2&sub_account_id=3&y=4', 'x=2&y=4'],
  ['upper case', 'AGENCY_ID=1&Sub_Account_Id=2&limit=1', 'limit=1'],
  ['without a value', 'agency_id&limit=1', 'limit=1'],
  ['empty value', 'agency_id=&limit=1', 'limit=1'],
  ['repeated', 'agency_id=1&agency_id=2&limit=1', 'limit=1'],
  ['percent-encoded name', 'agency%5Fid=1&limit=1', 'limit=1'],
  ['percent-encoded letters', '%61gency_id=1&limit=1', 'limit=1'],
  ['bracket forms', 'agency_id[]=1&sub_account_id[x]=2&limit=1', 'limit=1'],
  ['a value that mentions it is kept', 'q=agency_id&limit=1', 'q=agency_id&limit=1'],
  ['a longer name is kept', 'agency_ids=1&my_agency_id=2', 'agency_ids=1&my_agency_id=2'],
  ['malformed escape in another name is kept', '%zz=1&agency_id=2', '%zz=1'],
  ['empty parameters kept when something is removed', 'a=1&&agency_id=2&b', 'a=1&&b'],
]
for (const [name, query, expected] of queries) {
  t.test(`query: ${name}`, async (t) => {
    t.equal(stripTenantQuery(query), expected)
  })
}

t.test('tenant field names', async (t) => {
  for (const name of ['agency_id', 'AGENCY_ID', 'sub_account_id', 'Sub_Account_ID', 'agency_id[]']) t.ok(isTenantField(name), name)
  for (const name of ['agency', 'agencyid', 'agency-id', 'subaccount_id', 'name', 'agency_id_x']) t.notOk(isTenantField(name), name)
})

t.test('JSON body: top-level tenant fields go, everything else stays', async (t) => {
  const body = { name: 'x', agency_id: 'a', Sub_Account_Id: 's', nested: { agency_id: 'kept' }, list: [{ sub_account_id: 'kept' }] }
  stripTenantFields(body)
  t.same(body, { name: 'x', nested: { agency_id: 'kept' }, list: [{ sub_account_id: 'kept' }] })
})

t.test('JSON body: arrays and primitives are left alone', async (t) => {
  const list = [{ agency_id: 'a' }]
  stripTenantFields(list)
  t.same(list, [{ agency_id: 'a' }])
  for (const value of [null, 1, 'agency_id', true]) t.doesNotThrow(() => stripTenantFields(value))
})
