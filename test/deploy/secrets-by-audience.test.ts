/**
 * Secrets by audience, with the environments the Kubernetes manifests give:
 * with everything resource-service holds, nothing can be signed that
 * agency-service accepts (a key minted for another agency's sub-account was
 * the finding), nor a cache entry sealed that the gateway believes; the
 * gateway, with what it holds, still signs for both backends.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { join } from 'node:path'
import pino from 'pino'
import t from 'tap'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { readAudienceSecrets, readKeyCacheSecret } from '@scoped/shared/secrets'
import { AGENCY_SERVICE_AUDIENCE, contentDigest, signTenantHeaders } from '@scoped/shared/tenant-signature'
import type { SigningSecret } from '@scoped/shared/tenant-signature'
import { buildAgencyApp } from '@scoped/agency-service/app'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import { createTestDatabase } from '../helpers/database.js'
import type { Deployment } from './deploy-files.js'
import { isManifest, parseYamlDocuments, readProjectFile } from './deploy-files.js'

const deployments = ['gateway', 'agency-service', 'resource-service'].map((name) => {
  const file = join('deploy', 'kubernetes', `${name}-deployment.yaml`)
  const found = parseYamlDocuments(readProjectFile(file), file).filter(isManifest)[0] as Deployment | undefined
  if (found === undefined) throw new Error(`no Deployment in ${file}`)
  return found
})

/** One value per Secret key the manifests reference, shared by every container that references it (as in a cluster). */
const clusterSecrets = new Map<string, string>()

/** A container's environment as the cluster would give it: its literal values and its Secret references resolved. */
function environmentOf(name: string): Record<string, string> {
  const workload = deployments.find((d) => d.metadata.name === name)!
  const env: Record<string, string> = {}
  for (const variable of workload.spec.template.spec.containers[0]!.env ?? []) {
    const ref = variable.valueFrom?.secretKeyRef
    if (ref === undefined) {
      if (variable.value !== undefined) env[variable.name] = variable.value
      continue
    }
    // An optional key (a rotation's previous secret) is absent outside a rotation.
    if (ref.optional === true) continue
    const id = `${ref.name}/${ref.key}`
    if (!clusterSecrets.has(id)) clusterSecrets.set(id, randomBytes(32).toString('hex'))
    env[variable.name] = clusterSecrets.get(id)!
  }
  return env
}

t.test('with resource-service’s environment, no signature agency-service accepts and no cache secret', async (t) => {
  const gatewayEnv = environmentOf('gateway')
  const agencyEnv = environmentOf('agency-service')
  const resourceEnv = environmentOf('resource-service')
  for (const [name, env] of [
    ['gateway', gatewayEnv],
    ['agency-service', agencyEnv],
    ['resource-service', resourceEnv],
  ] as const) {
    t.notOk('TENANT_SIGNING_SECRET' in env, `${name} does not hold the master secret`)
  }
  t.throws(() => readAudienceSecrets(resourceEnv, AGENCY_SERVICE_AUDIENCE), /TENANT_SIGNING_SECRET/, 'agency-service’s secret cannot be had from it')
  t.equal(readKeyCacheSecret(resourceEnv), undefined, 'nor the cache secret')
  t.same(readKeyCacheSecret(gatewayEnv), readKeyCacheSecret(agencyEnv), 'the gateway and agency-service share the cache secret')

  const db = await createTestDatabase(t)
  const app = await buildAgencyApp({
    pool: db.pool,
    keys: new KeyService(db.pool, new KeyRevocationNotifier(db.pool, null)),
    logger: pino({ level: 'silent' }),
    signingSecrets: readAudienceSecrets(agencyEnv, AGENCY_SERVICE_AUDIENCE),
  })
  t.teardown(() => app.close())
  const tenants = new TenantStore(db.pool)
  const victim = await tenants.createAgency('Victim')
  const sub = await tenants.createSubAccount(victim.id, 'Victim West', 'test')
  const mint = (secret: SigningSecret) => {
    const url = `/v1/agency/sub-accounts/${sub.id}/keys`
    const body = JSON.stringify({ name: 'minted' })
    const tenant = { scope: 'AGENCY' as const, agencyId: victim.id, subAccountId: null, keyId: randomUUID() }
    const request = { method: 'POST', pathWithQuery: url, audience: AGENCY_SERVICE_AUDIENCE, contentDigest: contentDigest(body), nonce: randomUUID() }
    const headers = { ...signTenantHeaders(secret, request, tenant, Date.now() / 1000), 'content-type': 'application/json' }
    return app.inject({ method: 'POST', url, headers, payload: body })
  }
  // Everything resource-service holds, each tried as the signing secret.
  for (const [variable, value] of Object.entries(resourceEnv).filter(([name]) => /SECRET/.test(name))) {
    const forged = await mint(value)
    t.equal(forged.statusCode, 401, `signed with its ${variable}: refused`)
    t.same(forged.json(), { success: false, message: 'Request was not signed by the gateway' })
  }
  const minted = await mint(readAudienceSecrets(gatewayEnv, AGENCY_SERVICE_AUDIENCE)[0]!)
  t.equal(minted.statusCode, 201, 'the gateway’s secret for agency-service is accepted (the bystander: the real path works)')
  const keys = await db.pool.query(`SELECT 1 FROM api_keys WHERE sub_account_id = $1`, [sub.id])
  t.equal(keys.rowCount, 1, 'one key, the gateway’s')
})
