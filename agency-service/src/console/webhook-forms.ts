/**
 * The endpoint form as posted (register and edit): its URL, its events and,
 * when editing, whether it is enabled; every problem found, each on the field
 * it is about (form-errors.ts), judged by the same URL rules as the API.
 */
import type { FastifyRequest } from 'fastify'
import { urlProblem } from '../webhooks/address-policy.js'
import type { TargetPolicy } from '../webhooks/address-policy.js'
import type { WebhookEventType } from '../webhooks/event-types.js'
import { isWebhookEventType, webhookEventTypes } from '../webhooks/event-types.js'
import { formField } from './csrf.js'
import type { FieldError } from './form-errors.js'

export const URL_FIELD = 'webhook-url'

/** The id of an event's checkbox (`key.created` → `event-key-created`). */
export function eventFieldId(type: string): string {
  return `event-${type.replace(/[^a-z-]/g, '-')}`
}

/** A problem with the events is marked on the first checkbox, where the summary's link leads. */
export const EVENTS_FIELD = eventFieldId(webhookEventTypes[0])

/** What the form shows again when it is refused. */
export interface EndpointFormState {
  url?: string
  events?: readonly string[]
  enabled?: boolean
  errors?: readonly FieldError[]
}

export interface EndpointForm {
  state: EndpointFormState
  url: string
  events: WebhookEventType[]
  /** Absent from the registration form. */
  enabled?: boolean
  errors: FieldError[]
}

function postedEvents(request: FastifyRequest): string[] {
  const raw = (request.body as Record<string, unknown> | null)?.['events']
  return (Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]).filter((value): value is string => typeof value === 'string')
}

export function readEndpointForm(request: FastifyRequest, policy: TargetPolicy, withEnabled: boolean): EndpointForm {
  const url = (formField(request, 'url') ?? '').trim()
  const posted = postedEvents(request)
  const errors: FieldError[] = []
  const urlIssue = url === '' ? 'Enter the endpoint’s URL' : urlProblem(url, policy)
  if (urlIssue !== undefined) errors.push({ field: URL_FIELD, message: url === '' ? urlIssue : `The URL ${urlIssue}` })
  if (posted.length === 0) errors.push({ field: EVENTS_FIELD, message: 'Choose at least one event' })
  else if (!posted.every(isWebhookEventType)) errors.push({ field: EVENTS_FIELD, message: 'Choose events from the list' })
  const events = [...new Set(posted.filter(isWebhookEventType))]
  const enabled = withEnabled ? formField(request, 'enabled') !== 'false' : undefined
  const state: EndpointFormState = { url, events: posted, errors, ...(enabled === undefined ? {} : { enabled }) }
  return { state, url, events, errors, ...(enabled === undefined ? {} : { enabled }) }
}
