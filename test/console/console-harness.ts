/**
 * The console on a Fastify instance of its own (in-process, app.inject), over
 * a migrated test database, and a small browser-like client: a cookie jar
 * that honours cookie paths and deletions, and form posts that carry the
 * page's CSRF token and the headers a same-origin browser form sends.
 */
import { randomBytes } from 'node:crypto'
import Fastify from 'fastify'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import type { Pool } from '@scoped/shared/db'
import { errorEnvelopePlugin } from '@scoped/shared/error-envelope-plugin'
import type { KeyInvalidator } from '@scoped/shared/key-invalidation'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import type { PermissionCatalog } from '@scoped/agency-service/keys/permission-catalog'
import { TenantStore } from '@scoped/agency-service/tenants'
import type { Role } from '@scoped/agency-service/users/roles'
import { consolePlugin } from '@scoped/agency-service/console/index'
import { appendClientAddress } from '@scoped/shared/signed-client-address'
import { AGENCY_SERVICE_AUDIENCE } from '@scoped/shared/tenant-signature'
import { flushSignInRefusals, REFUSAL_MINUTE_MS } from '@scoped/agency-service/users/sign-in-refusals'
import { createTestDatabase } from '../helpers/database.js'
import type { Teardown } from '../helpers/teardown.js'

/** A clock the test moves by hand. */
export class TestClock {
  #now = new Date('2030-01-01T09:00:00.000Z')
  now = (): Date => new Date(this.#now)
  advance(ms: number): void {
    this.#now = new Date(this.#now.getTime() + ms)
  }
}

export interface ConsoleApp {
  app: FastifyInstance
  pool: Pool
  keys: KeyService
  clock: TestClock
}

/** `permissions`: what the routes file says (ROUTES_FILE, readPermissionCatalog); deploy/routes.yaml's when absent. */
export async function buildConsoleApp(pool: Pool, invalidator?: KeyInvalidator, clock = new TestClock(), permissions?: PermissionCatalog): Promise<ConsoleApp> {
  const keys = new KeyService(pool, invalidator ?? new KeyRevocationNotifier(pool, null), permissions === undefined ? {} : { permissions })
  const app = Fastify({ logger: false, trustProxy: true })
  await app.register(errorEnvelopePlugin)
  await app.register(consolePlugin, { prefix: '/console', pool, keys, now: clock.now })
  await app.ready()
  return { app, pool, keys, clock }
}

export async function startConsole(t: Teardown, invalidator?: KeyInvalidator): Promise<ConsoleApp> {
  const db = await createTestDatabase(t)
  const built = await buildConsoleApp(db.pool, invalidator)
  t.teardown(() => built.app.close())
  return built
}

/**
 * Refused sign-ins reach the audit trail once their minute has ended
 * (users/sign-in-refusals.ts): moves the clock past the minute and writes
 * them, as the console's timer would.
 */
export async function flushRefusals(harness: Pick<ConsoleApp, 'pool' | 'clock'>): Promise<void> {
  harness.clock.advance(REFUSAL_MINUTE_MS)
  await flushSignInRefusals(harness.pool, harness.clock.now())
}

export const PASSWORD = 'correct horse battery staple'

export interface World {
  agencyId: string
  subAccountId: string
  otherSubAccountId: string
  owner: { id: string; email: string }
  admin: { id: string; email: string }
  /** A member of the agency who belongs to `subAccountId` only. */
  member: { id: string; email: string }
}

let counter = 0

export async function createUserWith(pool: Pool, agencyId: string, role: Role, subAccountId?: string): Promise<{ id: string; email: string }> {
  counter++
  const email = `${role}${counter}-${Math.random().toString(36).slice(2, 8)}@example.test`
  return new TenantStore(pool).createUser({ email, password: PASSWORD, agencyId, role, ...(subAccountId === undefined ? {} : { subAccountId }) })
}

/** An agency with two sub-accounts, an owner, an admin, and a member of the first sub-account. */
export async function createWorld(pool: Pool, name = 'Acme'): Promise<World> {
  const tenants = new TenantStore(pool)
  const agency = await tenants.createAgency(name)
  const sub = await tenants.createSubAccount(agency.id, `${name} West`)
  const other = await tenants.createSubAccount(agency.id, `${name} East`)
  return {
    agencyId: agency.id,
    subAccountId: sub.id,
    otherSubAccountId: other.id,
    owner: await createUserWith(pool, agency.id, 'owner'),
    admin: await createUserWith(pool, agency.id, 'admin'),
    member: await createUserWith(pool, agency.id, 'member', sub.id),
  }
}

interface JarCookie {
  value: string
  path: string
}

/** A form's fields; a list is sent as the same name repeated (checkboxes). */
export type Form = Record<string, string | readonly string[]>

/** Headers a browser sends with a same-origin form post (inject's host is localhost:80). */
export const sameOriginHeaders = { origin: 'http://localhost:80', 'sec-fetch-site': 'same-origin' }

export class ConsoleClient {
  readonly jar = new Map<string, JarCookie>()

  /**
   * `gatewaySecret`: for agency-service's own app (buildAgencyApp), which believes only a client address the
   * gateway signed: the client's address is signed with it, as the gateway does. Without it, X-Forwarded-For
   * (for an app of the test's own that trusts it).
   */
  constructor(
    readonly app: FastifyInstance,
    readonly clientAddress = '203.0.113.10',
    readonly gatewaySecret?: string,
  ) {}

  private cookieHeader(path: string): string | undefined {
    const pairs = [...this.jar.entries()]
      // A browser matches a cookie's path against the request's path, never its query string.
      .filter(([, cookie]) => {
        const target = path.split('?', 1)[0]!
        return target === cookie.path || target.startsWith(cookie.path.endsWith('/') ? cookie.path : `${cookie.path}/`)
      })
      .map(([name, cookie]) => `${name}=${cookie.value}`)
    return pairs.length === 0 ? undefined : pairs.join('; ')
  }

  private remember(response: LightMyRequestResponse): LightMyRequestResponse {
    for (const cookie of response.cookies) {
      const gone = cookie.value === '' || (cookie.expires !== undefined && cookie.expires.getTime() <= Date.now()) || cookie.maxAge === 0
      if (gone) this.jar.delete(cookie.name)
      else this.jar.set(cookie.name, { value: cookie.value, path: cookie.path ?? '/' })
    }
    return response
  }

  private baseHeaders(method: string, path: string): Record<string, string> {
    const cookie = this.cookieHeader(path)
    const headers: Record<string, string> = { 'x-forwarded-for': this.clientAddress, ...(cookie === undefined ? {} : { cookie }) }
    if (this.gatewaySecret !== undefined) {
      const signed: string[] = []
      appendClientAddress(signed, this.gatewaySecret, { method, pathWithQuery: path, audience: AGENCY_SERVICE_AUDIENCE }, this.clientAddress, Date.now() / 1000)
      for (let i = 0; i < signed.length; i += 2) headers[signed[i]!] = signed[i + 1]!
    }
    return headers
  }

  async get(path: string): Promise<LightMyRequestResponse> {
    return this.remember(await this.app.inject({ method: 'GET', url: path, headers: this.baseHeaders('GET', path) }))
  }

  /**
   * A form post as a browser sends it; `headers` override or add (pass undefined to drop one). A form
   * without a one-time form token gets a fresh one, as a freshly drawn form would have.
   */
  async post(path: string, form: Form, headers: Record<string, string | undefined> = {}): Promise<LightMyRequestResponse> {
    const sent = { formToken: randomBytes(32).toString('base64url'), ...form }
    const merged: Record<string, string> = {}
    for (const [name, value] of Object.entries({
      ...this.baseHeaders('POST', path),
      'content-type': 'application/x-www-form-urlencoded',
      ...sameOriginHeaders,
      ...headers,
    })) {
      if (value !== undefined) merged[name] = value
    }
    const payload = new URLSearchParams()
    for (const [name, value] of Object.entries(sent)) for (const one of typeof value === 'string' ? [value] : value) payload.append(name, one)
    return this.remember(await this.app.inject({ method: 'POST', url: path, headers: merged, payload: payload.toString() }))
  }

  /** Posts the form on `pagePath` with that page's CSRF token and (when it has one) its form token. */
  async submit(pagePath: string, action: string, form: Form = {}): Promise<LightMyRequestResponse> {
    const page = await this.get(pagePath)
    const token = formTokenOf(page.body)
    return this.post(action, { csrf: csrfToken(page.body), ...(token === undefined ? {} : { formToken: token }), ...form })
  }

  async signIn(email: string, password = PASSWORD): Promise<LightMyRequestResponse> {
    return this.submit('/console/sign-in', '/console/sign-in', { email, password })
  }
}

/** The one-time form token of the first form on the page that has one. */
export function formTokenOf(body: string): string | undefined {
  return /name="formToken" value="([^"]+)"/.exec(body)?.[1]
}

export function csrfToken(body: string): string {
  const match = /name="csrf" value="([^"]+)"/.exec(body)
  if (match === null) throw new Error('no CSRF token on the page')
  return match[1]!
}

export async function signedIn(app: FastifyInstance, email: string, clientAddress?: string): Promise<ConsoleClient> {
  const client = new ConsoleClient(app, clientAddress)
  const response = await client.signIn(email)
  if (response.statusCode !== 303) throw new Error(`sign-in failed with ${response.statusCode}`)
  return client
}

/** The path the created-key redirect points at, and the page it shows. */
export async function createKeyThroughConsole(
  client: ConsoleClient,
  keysPath: string,
  name: string,
): Promise<{ created: LightMyRequestResponse; reveal: LightMyRequestResponse; plaintext: string }> {
  const created = await client.submit(keysPath, keysPath, { name })
  if (created.statusCode !== 303) throw new Error(`create answered ${created.statusCode}: ${created.body}`)
  const reveal = await client.get(String(created.headers.location))
  const match = /id="new-key" readonly value="([^"]+)"/.exec(reveal.body)
  if (match === null) throw new Error('no plaintext on the created-key page')
  return { created, reveal, plaintext: match[1]! }
}
