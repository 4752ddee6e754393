/**
 * The secrets beyond TENANT_SIGNING_SECRET (secrets.ts): each backend's own
 * signing secret and the key cache's, from their own variables or derived
 * from TENANT_SIGNING_SECRET with a label of their own.
 */
import t from 'tap'
import { hkdfSync } from 'node:crypto'
import { ConfigError } from '@scoped/shared/config'
import { audienceSecretVariable, deriveSecret, isAudience, readAudienceSecrets, readKeyCacheSecret } from '@scoped/shared/secrets'
import { AGENCY_SERVICE_AUDIENCE, RESOURCE_SERVICE_AUDIENCE } from '@scoped/shared/tenant-signature'

const master = 'm'.repeat(40)
const masterPrevious = 'n'.repeat(40)
const own = 'o'.repeat(40)
const ownPrevious = 'q'.repeat(40)

t.test('derivation is stable, 32 bytes, and separated by label and by master', async (t) => {
  const once = deriveSecret(master, 'tenant-signing:agency-service')
  t.equal(once.length, 32)
  t.same(deriveSecret(master, 'tenant-signing:agency-service'), once, 'the same master and label give the same secret')
  t.same(
    once,
    Buffer.from(hkdfSync('sha256', master, 'scoped-api v1', 'tenant-signing:agency-service', 32)),
    'HKDF-SHA256, so another implementation can derive it too',
  )
  const others = [
    deriveSecret(master, 'tenant-signing:resource-service'),
    deriveSecret(master, 'key-cache'),
    deriveSecret(masterPrevious, 'tenant-signing:agency-service'),
  ]
  for (const other of others) t.notSame(other, once)
  t.notSame(once, Buffer.from(master), 'never the master itself')
})

t.test('each audience has a variable of its own', async (t) => {
  t.equal(audienceSecretVariable(AGENCY_SERVICE_AUDIENCE), 'AGENCY_SERVICE_SIGNING_SECRET')
  t.equal(audienceSecretVariable(RESOURCE_SERVICE_AUDIENCE), 'RESOURCE_SERVICE_SIGNING_SECRET')
  for (const name of ['agency-service', 'resource-service', 'a', 'billing2-v3']) t.ok(isAudience(name), name)
  for (const name of ['', 'Agency-service', 'agency_service', '-agency', 'agency-', 'agency--service', '2agency', 'a'.repeat(65), 7, null]) {
    t.notOk(isAudience(name), String(name))
  }
  t.throws(() => readAudienceSecrets({ TENANT_SIGNING_SECRET: master }, 'Agency_Service'), /not an audience name/)
})

t.test("readAudienceSecrets: derived from TENANT_SIGNING_SECRET per audience, or the audience's own variable", async (t) => {
  const agency = readAudienceSecrets({ TENANT_SIGNING_SECRET: master }, AGENCY_SERVICE_AUDIENCE)
  const resource = readAudienceSecrets({ TENANT_SIGNING_SECRET: master }, RESOURCE_SERVICE_AUDIENCE)
  t.same(agency, [deriveSecret(master, 'tenant-signing:agency-service')])
  t.same(resource, [deriveSecret(master, 'tenant-signing:resource-service')])
  t.notSame(agency[0], resource[0], "one backend's secret cannot sign for the other")
  t.ok(Object.isFrozen(agency))

  const rows: Array<[string, Record<string, string>, Buffer[]]> = [
    ['its own variable wins over TENANT_SIGNING_SECRET', { TENANT_SIGNING_SECRET: master, AGENCY_SERVICE_SIGNING_SECRET: own }, [Buffer.from(own)]],
    ['its own variable alone is enough', { AGENCY_SERVICE_SIGNING_SECRET: own }, [Buffer.from(own)]],
    [
      "another audience's variable is not used",
      { TENANT_SIGNING_SECRET: master, RESOURCE_SERVICE_SIGNING_SECRET: own },
      [deriveSecret(master, 'tenant-signing:agency-service')],
    ],
    [
      'the previous master gives a previous derived secret',
      { TENANT_SIGNING_SECRET: master, TENANT_SIGNING_SECRET_PREVIOUS: masterPrevious },
      [deriveSecret(master, 'tenant-signing:agency-service'), deriveSecret(masterPrevious, 'tenant-signing:agency-service')],
    ],
    [
      'its own previous variable',
      { AGENCY_SERVICE_SIGNING_SECRET: own, AGENCY_SERVICE_SIGNING_SECRET_PREVIOUS: ownPrevious },
      [Buffer.from(own), Buffer.from(ownPrevious)],
    ],
    [
      'its own previous variable wins over the previous master',
      {
        AGENCY_SERVICE_SIGNING_SECRET: own,
        AGENCY_SERVICE_SIGNING_SECRET_PREVIOUS: ownPrevious,
        TENANT_SIGNING_SECRET: master,
        TENANT_SIGNING_SECRET_PREVIOUS: masterPrevious,
      },
      [Buffer.from(own), Buffer.from(ownPrevious)],
    ],
    [
      'moving from the master to an own variable: the derived secret is the previous one',
      { AGENCY_SERVICE_SIGNING_SECRET: own, TENANT_SIGNING_SECRET_PREVIOUS: master },
      [Buffer.from(own), deriveSecret(master, 'tenant-signing:agency-service')],
    ],
    [
      'an empty variable counts as unset',
      { TENANT_SIGNING_SECRET: master, AGENCY_SERVICE_SIGNING_SECRET: '', TENANT_SIGNING_SECRET_PREVIOUS: '' },
      [deriveSecret(master, 'tenant-signing:agency-service')],
    ],
  ]
  for (const [name, env, expected] of rows) t.same(readAudienceSecrets(env, AGENCY_SERVICE_AUDIENCE), expected, name)
})

t.test('readAudienceSecrets: a bad configuration is a ConfigError naming the variable', async (t) => {
  const rows: Array<[Record<string, string>, string, RegExp]> = [
    [{}, 'TENANT_SIGNING_SECRET', /^TENANT_SIGNING_SECRET: is required \(or AGENCY_SERVICE_SIGNING_SECRET\)$/],
    [{ TENANT_SIGNING_SECRET: 'x7q-tiny' }, 'TENANT_SIGNING_SECRET', /^TENANT_SIGNING_SECRET: is too short/],
    [{ AGENCY_SERVICE_SIGNING_SECRET: 'x7q-tiny' }, 'AGENCY_SERVICE_SIGNING_SECRET', /^AGENCY_SERVICE_SIGNING_SECRET: is too short/],
    [
      { TENANT_SIGNING_SECRET: master, TENANT_SIGNING_SECRET_PREVIOUS: 'x7q-tiny' },
      'TENANT_SIGNING_SECRET_PREVIOUS',
      /^TENANT_SIGNING_SECRET_PREVIOUS: is too short/,
    ],
    [
      { TENANT_SIGNING_SECRET: master, TENANT_SIGNING_SECRET_PREVIOUS: master },
      'TENANT_SIGNING_SECRET_PREVIOUS',
      /^TENANT_SIGNING_SECRET_PREVIOUS: must differ from TENANT_SIGNING_SECRET$/,
    ],
    [
      { AGENCY_SERVICE_SIGNING_SECRET: own, AGENCY_SERVICE_SIGNING_SECRET_PREVIOUS: own },
      'AGENCY_SERVICE_SIGNING_SECRET_PREVIOUS',
      /^AGENCY_SERVICE_SIGNING_SECRET_PREVIOUS: must differ from AGENCY_SERVICE_SIGNING_SECRET$/,
    ],
    [{ RESOURCE_SERVICE_SIGNING_SECRET: own }, 'TENANT_SIGNING_SECRET', /^TENANT_SIGNING_SECRET: is required \(or AGENCY_SERVICE_SIGNING_SECRET\)$/],
  ]
  for (const [env, variable, message] of rows) {
    const thrown = (() => {
      try {
        readAudienceSecrets(env, AGENCY_SERVICE_AUDIENCE)
      } catch (error) {
        return error
      }
      return undefined
    })()
    t.type(thrown, ConfigError, JSON.stringify(env))
    t.match(thrown, { variable, message }, JSON.stringify(env))
    for (const value of Object.values(env)) t.notMatch((thrown as Error).message, value, 'the value is never echoed')
  }
})

t.test('readKeyCacheSecret: KEY_CACHE_SECRET, else derived from TENANT_SIGNING_SECRET, else none', async (t) => {
  t.same(readKeyCacheSecret({ KEY_CACHE_SECRET: own, TENANT_SIGNING_SECRET: master }), Buffer.from(own))
  t.same(readKeyCacheSecret({ TENANT_SIGNING_SECRET: master }), deriveSecret(master, 'key-cache'))
  t.notSame(
    readKeyCacheSecret({ TENANT_SIGNING_SECRET: master }),
    readAudienceSecrets({ TENANT_SIGNING_SECRET: master }, AGENCY_SERVICE_AUDIENCE)[0],
    'unrelated to any signing secret',
  )
  t.equal(readKeyCacheSecret({}), undefined)
  t.throws(() => readKeyCacheSecret({ KEY_CACHE_SECRET: 'x7q-tiny' }), { name: 'ConfigError', variable: 'KEY_CACHE_SECRET' })
})
