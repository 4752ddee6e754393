/**
 * An agency's webhook endpoints and their deliveries, for the API, the
 * console and ctl. Every method takes the agency: another agency's endpoint
 * is not found. The signing secret leaves only as the answer to a creation or
 * a roll; reads never select it.
 */
import type { Pool } from '@scoped/shared/db'
import type { ListQuery, Page } from '@scoped/shared/pagination'
import { listPage } from '@scoped/shared/pagination'
import type { WebhookEventType } from './event-types.js'
import { newEndpointSecret } from './signing.js'

/** The contract's endpoint item, plus how its deliveries stand (for the console's list). */
export interface WebhookEndpoint {
  id: string
  url: string
  events: WebhookEventType[]
  enabled: boolean
  createdAt: string
}

export interface WebhookEndpointWithSecret extends WebhookEndpoint {
  secret: string
}

export type DeliveryState = 'pending' | 'delivered' | 'failed'

/** One attempt, the contract's delivery item. */
export interface WebhookDelivery {
  id: string
  eventId: string
  type: string
  attempt: number
  at: string
  responseStatus: number | null
  durationMs: number | null
  error: string | null
  state: DeliveryState
}

/** How an endpoint's messages stand: failed (given up) and pending ones, and how its latest finished attempt went. */
export interface EndpointHealth {
  failed: number
  pending: number
  /** The latest finished attempt's error (null when it was delivered, or there was none). */
  lastError: string | null
  /** When the latest finished attempt was made, and whether it delivered; null when none has finished. */
  lastAttemptAt: string | null
  lastDelivered: boolean | null
}

/** At most this many endpoints per agency. */
export const MAX_ENDPOINTS_PER_AGENCY = 20

interface EndpointRow {
  id: string
  url: string
  events: WebhookEventType[]
  enabled: boolean
  created_at: Date
}

const ENDPOINT_COLUMNS = 'id, url, events, enabled, created_at'

function toEndpoint(row: EndpointRow): WebhookEndpoint {
  return { id: row.id, url: row.url, events: row.events, enabled: row.enabled, createdAt: row.created_at.toISOString() }
}

interface AttemptRow {
  id: string
  event_id: string
  type: string
  attempt: number
  at: Date
  response_status: number | null
  duration_ms: number | null
  error: string | null
  state: DeliveryState
}

function toDelivery(row: AttemptRow): WebhookDelivery {
  return {
    id: row.id,
    eventId: row.event_id,
    type: row.type,
    attempt: row.attempt,
    at: row.at.toISOString(),
    responseStatus: row.response_status,
    durationMs: row.duration_ms,
    error: row.error,
    state: row.state,
  }
}

export interface EndpointChanges {
  url?: string
  events?: WebhookEventType[]
  enabled?: boolean
}

export class WebhookStore {
  constructor(private readonly pool: Pool) {}

  async list(agencyId: string, query: ListQuery): Promise<Page<WebhookEndpoint>> {
    return listPage(this.pool, {
      table: 'webhook_endpoints',
      columns: ENDPOINT_COLUMNS,
      where: ['agency_id = $1'],
      values: [agencyId],
      query,
      toItem: toEndpoint,
    })
  }

  /** Every endpoint of the agency, oldest first (ctl, the console). */
  async all(agencyId: string): Promise<WebhookEndpoint[]> {
    const { rows } = await this.pool.query<EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE agency_id = $1 ORDER BY created_at, id`, [
      agencyId,
    ])
    return rows.map(toEndpoint)
  }

  /** A new endpoint and its secret; undefined when the agency has MAX_ENDPOINTS_PER_AGENCY already. */
  async create(agencyId: string, url: string, events: readonly WebhookEventType[]): Promise<WebhookEndpointWithSecret | undefined> {
    const client = await this.pool.connect()
    try {
      await client.query('BEGIN')
      // Creations of one agency take turns, so the limit holds under concurrent requests.
      await client.query('SELECT 1 FROM agencies WHERE id = $1 FOR NO KEY UPDATE', [agencyId])
      const secret = newEndpointSecret()
      const { rows } = await client.query<EndpointRow>(
        `INSERT INTO webhook_endpoints (agency_id, url, events, secret)
         SELECT $1, $2, $3, $4 WHERE (SELECT count(*) FROM webhook_endpoints WHERE agency_id = $1) < $5
         RETURNING ${ENDPOINT_COLUMNS}`,
        [agencyId, url, events, secret, MAX_ENDPOINTS_PER_AGENCY],
      )
      await client.query('COMMIT')
      const row = rows[0]
      return row === undefined ? undefined : { ...toEndpoint(row), secret }
    } catch (error) {
      await client.query('ROLLBACK')
      throw error
    } finally {
      client.release()
    }
  }

  async find(agencyId: string, id: string): Promise<WebhookEndpoint | undefined> {
    const { rows } = await this.pool.query<EndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1 AND agency_id = $2`, [id, agencyId])
    return rows[0] === undefined ? undefined : toEndpoint(rows[0])
  }

  async update(agencyId: string, id: string, changes: EndpointChanges): Promise<WebhookEndpoint | undefined> {
    const { rows } = await this.pool.query<EndpointRow>(
      `UPDATE webhook_endpoints SET url = coalesce($3, url), events = coalesce($4, events), enabled = coalesce($5, enabled)
        WHERE id = $1 AND agency_id = $2 RETURNING ${ENDPOINT_COLUMNS}`,
      [id, agencyId, changes.url ?? null, changes.events ?? null, changes.enabled ?? null],
    )
    return rows[0] === undefined ? undefined : toEndpoint(rows[0])
  }

  /** Deletes the endpoint with its messages and attempts; false when there was none. */
  async delete(agencyId: string, id: string): Promise<boolean> {
    const { rowCount } = await this.pool.query(`DELETE FROM webhook_endpoints WHERE id = $1 AND agency_id = $2`, [id, agencyId])
    return rowCount === 1
  }

  /** A new secret; the old one signs nothing from now on. */
  async rollSecret(agencyId: string, id: string): Promise<WebhookEndpointWithSecret | undefined> {
    const secret = newEndpointSecret()
    const { rows } = await this.pool.query<EndpointRow>(
      `UPDATE webhook_endpoints SET secret = $3 WHERE id = $1 AND agency_id = $2 RETURNING ${ENDPOINT_COLUMNS}`,
      [id, agencyId, secret],
    )
    return rows[0] === undefined ? undefined : { ...toEndpoint(rows[0]), secret }
  }

  /** The endpoint's attempts, newest first; undefined when the endpoint is not the agency's. */
  async deliveries(agencyId: string, id: string, query: ListQuery): Promise<Page<WebhookDelivery> | undefined> {
    if ((await this.find(agencyId, id)) === undefined) return undefined
    return listPage(this.pool, {
      table: 'webhook_attempts',
      columns: `id, attempt, at, response_status, duration_ms, error, state,
                (SELECT m.event_id FROM webhook_messages m WHERE m.id = message_id) AS event_id,
                (SELECT m.type FROM webhook_messages m WHERE m.id = message_id) AS type`,
      where: ['endpoint_id = $1'],
      values: [id],
      timeColumn: 'at',
      order: 'desc',
      query,
      toItem: toDelivery,
    })
  }

  /** One attempt of the endpoint, or undefined when it is not one of this agency's endpoint's. */
  async findDelivery(agencyId: string, endpointId: string, deliveryId: string): Promise<WebhookDelivery | undefined> {
    const { rows } = await this.pool.query<AttemptRow>(
      `SELECT a.id, a.attempt, a.at, a.response_status, a.duration_ms, a.error, a.state, m.event_id, m.type
         FROM webhook_attempts a JOIN webhook_messages m ON m.id = a.message_id JOIN webhook_endpoints e ON e.id = a.endpoint_id
        WHERE a.id = $3 AND a.endpoint_id = $2 AND e.agency_id = $1`,
      [agencyId, endpointId, deliveryId],
    )
    return rows[0] === undefined ? undefined : toDelivery(rows[0])
  }

  /**
   * Sends an attempt's message again, now, with the same webhook-id, and
   * retries it on the usual schedule for another 72 h; false when the
   * attempt is not one of this endpoint's.
   */
  async redeliver(agencyId: string, endpointId: string, deliveryId: string): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `UPDATE webhook_messages m
          SET state = 'pending', next_attempt_at = now(), finished_at = NULL, give_up_at = greatest(m.give_up_at, now() + interval '72 hours')
         FROM webhook_attempts a JOIN webhook_endpoints e ON e.id = a.endpoint_id
        WHERE a.id = $3 AND a.endpoint_id = $2 AND e.agency_id = $1 AND m.id = a.message_id`,
      [agencyId, endpointId, deliveryId],
    )
    return rowCount === 1
  }

  /** Failed and pending messages per endpoint of the agency, and each one's latest finished attempt. */
  async health(agencyId: string): Promise<Map<string, EndpointHealth>> {
    const { rows } = await this.pool.query<{
      id: string
      failed: number
      pending: number
      last_error: string | null
      last_at: Date | null
      last_state: DeliveryState | null
    }>(
      `SELECT e.id,
              (SELECT count(*)::int FROM webhook_messages m WHERE m.endpoint_id = e.id AND m.state = 'failed') AS failed,
              (SELECT count(*)::int FROM webhook_messages m WHERE m.endpoint_id = e.id AND m.state = 'pending') AS pending,
              last.error AS last_error, last.at AS last_at, last.state AS last_state
         FROM webhook_endpoints e
         LEFT JOIN LATERAL (SELECT a.error, a.at, a.state FROM webhook_attempts a
                             WHERE a.endpoint_id = e.id AND a.state <> 'pending' ORDER BY a.at DESC, a.id DESC LIMIT 1) last ON true
        WHERE e.agency_id = $1`,
      [agencyId],
    )
    return new Map(
      rows.map((row) => [
        row.id,
        {
          failed: row.failed,
          pending: row.pending,
          lastError: row.last_error,
          lastAttemptAt: row.last_at === null ? null : row.last_at.toISOString(),
          lastDelivered: row.last_state === null ? null : row.last_state === 'delivered',
        },
      ]),
    )
  }
}
