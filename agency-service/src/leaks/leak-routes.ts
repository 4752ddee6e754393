/**
 * The two doors through which a leaked key is reported; neither needs an API
 * key (the gateway forwards both without one: gateway/src/route-map.ts,
 * LEAK_REPORT_PATHS):
 *
 *   POST /v1/secret-scanning/github  GitHub's secret-scanning partner
 *     protocol: a list of `{token, type, url, source}`, signed by GitHub
 *     (github-keys.ts). The signature is checked over the raw bytes before the
 *     body is read as JSON and before any key is looked up: a bad or missing
 *     one is 401. The answer labels each token `true_positive` (a key with
 *     its hash exists, active or not) or `false_positive`.
 *   POST /v1/credentials/revoke  `{"credentials":[…]}`, from anyone who
 *     found a key: always 202 `{"success":true}`, whatever was found (and in
 *     the same time: leak-response.ts), within a client's allowance
 *     (report-throttle.ts).
 *
 * Both bodies are read here as raw bytes, whatever their content type, and
 * parsed as JSON by this plugin; tokens are never logged.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { errorResponse } from '@scoped/shared/api-document'
import { NO_QUERY_SCHEMA } from '@scoped/shared/backend-server'
import { sendError } from '@scoped/shared/error-envelope-plugin'
import { ApiError, errorCatalog } from '@scoped/shared/errors'
import { normalizeAddress } from '@scoped/shared/ip-address'
import { isApiError } from '@scoped/shared/errors'
import type { KeyContext } from '../keys/key-context.js'
import { KEY_IDENTIFIER_HEADER, SIGNATURE_HEADER } from './github-keys.js'
import type { LeakConfig } from './leak-config.js'
import type { ReportedLeak } from './leak-response.js'
import { leakReporter, respondToLeaks } from './leak-response.js'
import { ReportThrottle } from './report-throttle.js'

export const GITHUB_SCANNING_PATH = '/v1/secret-scanning/github'
export const CREDENTIALS_REVOKE_PATH = '/v1/credentials/revoke'
/** What the public revocation API takes in one report. */
export const MAX_REPORTED_CREDENTIALS = 100
/** What one GitHub alert may hold: GitHub batches matches, never near this many. */
export const MAX_GITHUB_TOKENS = 1_000
const GITHUB_BODY_LIMIT = 1024 * 1024
const REPORT_BODY_LIMIT = 64 * 1024
/** The longest token looked at: far longer than a key, so anything key-shaped fits. */
const MAX_TOKEN_LENGTH = 1_024
/** Where the trail's columns stop (migration 020). */
const MAX_SOURCE_LENGTH = 100
const MAX_URL_LENGTH = 2_048

export interface LeakRoutesOptions {
  keys: KeyContext
  config: LeakConfig
  /** The revocation API's allowance per client; one per app by default. */
  throttle?: ReportThrottle
}

interface GithubMatch {
  token: string
  type: string
  url?: string
  source?: string
}

const githubBodySchema = {
  description: 'The matches GitHub found, signed with GitHub’s key.',
  type: 'array',
  maxItems: MAX_GITHUB_TOKENS,
  items: {
    type: 'object',
    properties: {
      token: { type: 'string', minLength: 1, maxLength: MAX_TOKEN_LENGTH },
      type: { type: 'string', maxLength: 256 },
      url: { type: 'string', maxLength: 8_192 },
      source: { type: 'string', maxLength: 256 },
    },
    required: ['token', 'type'],
  },
} as const

const githubAnswerSchema = {
  description: 'Each token with its label: `true_positive` when it is a key of this service (active or not), else `false_positive`.',
  type: 'array',
  items: {
    type: 'object',
    properties: {
      token_raw: { type: 'string' },
      token_type: { type: 'string' },
      label: { type: 'string', enum: ['true_positive', 'false_positive'] },
    },
    required: ['token_raw', 'token_type', 'label'],
    additionalProperties: false,
  },
} as const

const reportBodySchema = {
  type: 'object',
  properties: {
    credentials: {
      description: 'The keys found, as they were found (`sak_live_…`).',
      type: 'array',
      minItems: 1,
      maxItems: MAX_REPORTED_CREDENTIALS,
      items: { type: 'string', minLength: 1, maxLength: MAX_TOKEN_LENGTH },
    },
  },
  required: ['credentials'],
  additionalProperties: false,
} as const

const acceptedSchema = {
  description: 'Accepted, whatever was found: the answer never says whether a credential is a key.',
  type: 'object',
  properties: { success: { type: 'boolean', enum: [true] } },
  required: ['success'],
  additionalProperties: false,
} as const

/** What the API description says of each (@fastify/swagger reads these beside the schemas). */
const githubDocumentation = {
  summary: 'Receive GitHub secret-scanning alerts',
  description:
    'GitHub’s secret-scanning partner protocol, for GitHub alone: authenticated by its `Github-Public-Key-Identifier` and `Github-Public-Key-Signature` headers (ECDSA P-256 with SHA-256 over the raw body) against `SECRET_SCANNING_KEYS_FILE`; a request GitHub did not sign is 401. Every active key found is revoked at once (unless `LEAKED_KEY_ACTION=notify`) and recorded as `key.leaked`.',
}
const reportDocumentation = {
  summary: 'Report leaked keys',
  description: `For anyone who finds a key: every active key among \`credentials\` (at most ${MAX_REPORTED_CREDENTIALS}) is revoked at once (unless \`LEAKED_KEY_ACTION=notify\`) and recorded as \`key.leaked\`. Always 202, whatever was found. A client address may send at least 60 reports an hour.`,
}

/** Stands for a body that is not JSON until the request's own checks have run (the signature first). */
const NOT_JSON = Symbol('not JSON')

function clientAddress(request: FastifyRequest): string | null {
  return normalizeAddress(request.ip) ?? null
}

/** Each request's raw body, for the GitHub signature. */
type RawBodies = WeakMap<FastifyRequest, Buffer>

function requireJson(request: FastifyRequest): void {
  if (request.body === NOT_JSON) throw new ApiError('invalidJson')
}

function githubRoute(app: FastifyInstance, { keys, config }: LeakRoutesOptions, rawBodies: RawBodies): void {
  app.post<{ Body: GithubMatch[] }>(
    GITHUB_SCANNING_PATH,
    {
      bodyLimit: GITHUB_BODY_LIMIT,
      schema: {
        ...githubDocumentation,
        querystring: NO_QUERY_SCHEMA,
        body: githubBodySchema,
        response: { 200: githubAnswerSchema, 401: errorResponse('Not signed by GitHub') },
      },
      preValidation: async (request) => {
        const signed = config.githubKeys?.verify(
          rawBodies.get(request) ?? Buffer.alloc(0),
          request.headers[KEY_IDENTIFIER_HEADER],
          request.headers[SIGNATURE_HEADER],
        )
        if (signed !== true) {
          request.log.warn('secret-scanning alert refused: no valid GitHub signature')
          throw new ApiError('githubSignature')
        }
        requireJson(request)
      },
    },
    async (request) => {
      const matches = request.body
      if (matches.length === 0) return []
      const leaks: ReportedLeak[] = matches.map((match) => ({
        token: match.token,
        report: { source: (match.source ?? 'github').slice(0, MAX_SOURCE_LENGTH) || 'github', url: match.url?.slice(0, MAX_URL_LENGTH) || null },
      }))
      const response = await respondToLeaks(keys, leaks, leakReporter('github', clientAddress(request)), config.action)
      request.log.info({ reported: matches.length, revoked: response.revoked, notified: response.notified }, 'secret-scanning alert answered')
      return matches.map((match, index) => ({
        token_raw: match.token,
        token_type: match.type,
        label: response.exists[index] === true ? 'true_positive' : 'false_positive',
      }))
    },
  )
}

function reportRoute(app: FastifyInstance, { keys, config, throttle = new ReportThrottle() }: LeakRoutesOptions): void {
  app.post<{ Body: { credentials: string[] } }>(
    CREDENTIALS_REVOKE_PATH,
    {
      bodyLimit: REPORT_BODY_LIMIT,
      schema: {
        ...reportDocumentation,
        querystring: NO_QUERY_SCHEMA,
        body: reportBodySchema,
        response: { 202: acceptedSchema, 429: errorResponse('Over the client’s allowance (with `Retry-After`)') },
      },
      // Counted before the body is read: a malformed report uses the allowance too.
      onRequest: async (request, reply: FastifyReply) => {
        const decision = throttle.take(request.ip)
        if (decision.allowed) return
        reply.header('retry-after', String(decision.retryAfterSeconds))
        return sendError(reply, errorCatalog.rateLimited.status, errorCatalog.rateLimited.message)
      },
      preValidation: async (request) => requireJson(request),
    },
    async (request, reply) => {
      const leaks: ReportedLeak[] = request.body.credentials.map((token) => ({ token, report: { source: 'report', url: null } }))
      try {
        const response = await respondToLeaks(keys, leaks, leakReporter('report', clientAddress(request)), config.action)
        request.log.info({ reported: leaks.length, revoked: response.revoked, notified: response.notified }, 'leaked-key report answered')
      } catch (error) {
        // The answer is the same whatever happened, not to tell a reporter anything; the operators hear of it.
        if (!isApiError(error) || error.statusCode !== 503) throw error
        request.log.warn({ err: error }, 'leaked-key report: revocation not confirmed by every gateway replica')
      }
      return reply.code(202).send({ success: true })
    },
  )
}

export async function leakRoutes(app: FastifyInstance, options: LeakRoutesOptions): Promise<void> {
  const rawBodies: RawBodies = new WeakMap()
  // Every content type, as bytes: the GitHub signature covers them exactly; a body that is not JSON is refused
  // only after the signature (preValidation), so an unsigned request is 401 whatever it sent.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (request, body: Buffer, done) => {
    rawBodies.set(request, body)
    try {
      done(null, JSON.parse(body.toString('utf8')))
    } catch {
      done(null, NOT_JSON)
    }
  })
  githubRoute(app, options, rawBodies)
  reportRoute(app, options)
}
