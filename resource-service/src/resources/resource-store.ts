/**
 * The SQL of every resource: list, read, create, update, delete, each one
 * bound to the caller's sub-account (`sub_account_id = $1` in every
 * statement), so a row of another tenant is never read, changed or deleted:
 * it simply is not found. Table and column names come from the resource
 * definitions in this package, never from a request.
 */
import type { Pool } from '@scoped/shared/db'
import { pgErrorCode, pgErrorCodes, sqlIdentifier } from '@scoped/shared/db'
import { ApiError, invalidField } from '@scoped/shared/errors'
import type { ListQuery, Page } from '@scoped/shared/pagination'
import { listTenantPage } from '@scoped/shared/pagination'

export interface ResourceRow {
  id: string
  created_at: Date
  updated_at: Date
}

/** Column name to value, from a validated request body. */
export type Columns = Record<string, unknown>

export interface ResourceDefinition<Row extends ResourceRow, Item> {
  /** The path under /v1, e.g. `/agents`. */
  path: string
  /** The table, e.g. `agents`. */
  table: string
  /** For messages: "Agent not found". */
  noun: string
  /** Request bodies (create, update) and the item every answer carries (toItem's shape: responses are serialized with it). */
  schemas: { create: object; update: object; item: object }
  /** The columns a validated body sets; throws an ApiError naming a field it refuses. */
  columns(body: Record<string, unknown>): Columns
  toItem(row: Row): Item
  /** The field and the problem for a reference to a row the caller's sub-account does not have, by foreign-key constraint. */
  referenceErrors?: Readonly<Record<string, { field: string; problem: string }>>
  /** Message when a row cannot be deleted because others still refer to it. */
  inUseMessage?: string
}

export class ResourceStore<Row extends ResourceRow, Item> {
  private readonly table: string

  constructor(
    private readonly pool: Pool,
    private readonly definition: ResourceDefinition<Row, Item>,
  ) {
    this.table = sqlIdentifier(definition.table)
  }

  notFound(): ApiError {
    return new ApiError('notFound', `${this.definition.noun} not found`)
  }

  async list(subAccountId: string, query: ListQuery): Promise<Page<Item>> {
    return listTenantPage<Row, Item>(this.pool, {
      table: this.table,
      tenantColumn: 'sub_account_id',
      tenantId: subAccountId,
      query,
      toItem: (row) => this.definition.toItem(row),
    })
  }

  async find(subAccountId: string, id: string): Promise<Item | undefined> {
    const { rows } = await this.pool.query<Row>(`SELECT * FROM ${this.table} WHERE sub_account_id = $1 AND id = $2`, [subAccountId, id])
    return rows[0] === undefined ? undefined : this.definition.toItem(rows[0])
  }

  async create(subAccountId: string, columns: Columns): Promise<Item> {
    const names = Object.keys(columns).map(sqlIdentifier)
    const placeholders = names.map((_, index) => `$${index + 2}`)
    const sql = `INSERT INTO ${this.table} (sub_account_id${names.map((name) => `, ${name}`).join('')})
                 VALUES ($1${placeholders.map((p) => `, ${p}`).join('')}) RETURNING *`
    const rows = await this.write(sql, [subAccountId, ...Object.values(columns)])
    return this.definition.toItem(rows[0]!)
  }

  async update(subAccountId: string, id: string, columns: Columns): Promise<Item | undefined> {
    const assignments = Object.keys(columns).map((name, index) => `${sqlIdentifier(name)} = $${index + 3}`)
    const sql = `UPDATE ${this.table} SET ${assignments.join(', ')}, updated_at = now()
                  WHERE sub_account_id = $1 AND id = $2 RETURNING *`
    const rows = await this.write(sql, [subAccountId, id, ...Object.values(columns)])
    return rows[0] === undefined ? undefined : this.definition.toItem(rows[0])
  }

  async delete(subAccountId: string, id: string): Promise<boolean> {
    try {
      const result = await this.pool.query(`DELETE FROM ${this.table} WHERE sub_account_id = $1 AND id = $2`, [subAccountId, id])
      return (result.rowCount ?? 0) > 0
    } catch (error) {
      if (pgErrorCode(error) === pgErrorCodes.foreignKeyViolation) {
        throw new ApiError('conflict', this.definition.inUseMessage ?? `${this.definition.noun} is still in use`)
      }
      throw error
    }
  }

  /** An insert or update; a reference the sub-account cannot make becomes the caller's error. */
  private async write(sql: string, values: unknown[]): Promise<Row[]> {
    try {
      return (await this.pool.query<Row>(sql, values)).rows
    } catch (error) {
      if (pgErrorCode(error) === pgErrorCodes.foreignKeyViolation) {
        const constraint = (error as { constraint?: unknown }).constraint
        const reference = typeof constraint === 'string' ? this.definition.referenceErrors?.[constraint] : undefined
        // Any other reference is the row's sub-account, which was deleted while this request was on its way.
        throw reference === undefined ? new ApiError('subAccountNotFound') : invalidField(reference.field, reference.problem)
      }
      throw error
    }
  }
}
