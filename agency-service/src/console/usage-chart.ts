/**
 * The Usage page's pictures, drawn on the server as SVG: requests over time
 * stacked by outcome, and latency p50/p99 over time as two lines. Colours
 * come from classes in console.css (the strict CSP allows no inline style).
 * Each picture is named by its heading; the table beside it holds the same
 * figures for screen readers and for anyone who would rather read.
 */
import type { UsageOutcome } from '@scoped/shared/usage'
import { usageOutcomes } from '@scoped/shared/usage'
import type { UsagePoint } from '../usage/usage-report.js'
import type { SafeHtml } from './html.js'
import { html } from './html.js'

const WIDTH = 720
const HEIGHT = 260
/** Room for the axis labels: left (counts), bottom (times), a little at the top, and room at the right for the last time label. */
const LEFT = 64
const BOTTOM = 44
const TOP = 12
const RIGHT = 44
const PLOT_W = WIDTH - LEFT - RIGHT
const PLOT_H = HEIGHT - TOP - BOTTOM

/** A round number at or above `value`, so the axis reads 0, half and that. */
export function niceCeiling(value: number): number {
  if (value <= 0) return 1
  const power = 10 ** Math.floor(Math.log10(value))
  const step = [1, 2, 2.5, 5, 10].find((m) => m * power >= value) ?? 10
  return step * power
}

/** The bucket's time as the axis shows it: `MM-DD HH:MM` (UTC). */
export function bucketLabel(iso: string): string {
  return `${iso.slice(5, 10)} ${iso.slice(11, 16)}`
}

const round = (value: number): string => value.toFixed(1)

function axes(max: number, points: readonly UsagePoint[], yTitle: string, format: (value: number) => string): SafeHtml {
  const ticks = [0, max / 2, max]
  const xTicks = points.length === 0 ? [] : [...new Set([0, Math.floor((points.length - 1) / 2), points.length - 1])]
  const slot = points.length === 0 ? PLOT_W : PLOT_W / points.length
  return html`<g class="chart-axis">
  <line x1="${LEFT}" y1="${TOP + PLOT_H}" x2="${LEFT + PLOT_W}" y2="${TOP + PLOT_H}"></line>
  <line x1="${LEFT}" y1="${TOP}" x2="${LEFT}" y2="${TOP + PLOT_H}"></line>
  ${ticks.map((tick) => {
    const y = TOP + PLOT_H - (tick / max) * PLOT_H
    return html`<line class="chart-grid" x1="${LEFT}" y1="${round(y)}" x2="${LEFT + PLOT_W}" y2="${round(y)}"></line><text x="${LEFT - 6}" y="${round(y + 4)}" text-anchor="end">${format(tick)}</text>`
  })}
  ${xTicks.map((i) => html`<text x="${round(LEFT + slot * i + slot / 2)}" y="${TOP + PLOT_H + 16}" text-anchor="middle">${bucketLabel(points[i]!.at)}</text>`)}
  <text x="${LEFT + PLOT_W / 2}" y="${HEIGHT - 6}" text-anchor="middle" class="chart-title">Time (UTC)</text>
  <text x="14" y="${TOP + PLOT_H / 2}" text-anchor="middle" class="chart-title" transform="rotate(-90 14 ${TOP + PLOT_H / 2})">${yTitle}</text>
</g>`
}

/** Requests per bucket, one stacked bar per bucket, one colour per outcome (the outcomes' order, served at the bottom). */
export function requestsChart(points: readonly UsagePoint[], labelledBy: string): SafeHtml {
  const max = niceCeiling(Math.max(0, ...points.map((p) => p.requests)))
  const slot = points.length === 0 ? PLOT_W : PLOT_W / points.length
  const barWidth = Math.max(1, slot * 0.8)
  const bars = points.map((point, i) => {
    let base = TOP + PLOT_H
    const x = LEFT + slot * i + (slot - barWidth) / 2
    return usageOutcomes.map((outcome: UsageOutcome) => {
      const count = point.outcomes[outcome]
      if (count === 0) return ''
      const height = (count / max) * PLOT_H
      base -= height
      return html`<rect class="chart-outcome-${outcome}" x="${round(x)}" y="${round(base)}" width="${round(barWidth)}" height="${round(height)}"></rect>`
    })
  })
  return html`<svg class="chart" viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-labelledby="${labelledBy}" focusable="false">
${axes(max, points, 'Requests', (value) => String(Math.round(value)))}
<g>${bars}</g>
</svg>`
}

/** Latency p50 and p99 per bucket as two lines (a bucket without requests leaves a gap). */
export function latencyChart(points: readonly UsagePoint[], labelledBy: string): SafeHtml {
  const values = points.flatMap((p) => [p.latencyMs.p50, p.latencyMs.p99]).filter((v): v is number => v !== null)
  const max = niceCeiling(Math.max(0, ...values))
  const slot = points.length === 0 ? PLOT_W : PLOT_W / points.length
  const line = (pick: (point: UsagePoint) => number | null, name: string): SafeHtml => {
    const segments: string[][] = [[]]
    points.forEach((point, i) => {
      const value = pick(point)
      if (value === null) {
        if (segments.at(-1)!.length > 0) segments.push([])
        return
      }
      segments.at(-1)!.push(`${round(LEFT + slot * i + slot / 2)},${round(TOP + PLOT_H - (value / max) * PLOT_H)}`)
    })
    return html`${segments
      .filter((segment) => segment.length > 0)
      .map((segment) =>
        segment.length === 1
          ? html`<circle class="chart-line-${name}" cx="${segment[0]!.split(',')[0]!}" cy="${segment[0]!.split(',')[1]!}" r="3"></circle>`
          : html`<polyline class="chart-line-${name}" points="${segment.join(' ')}"></polyline>`,
      )}`
  }
  return html`<svg class="chart" viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-labelledby="${labelledBy}" focusable="false">
${axes(max, points, 'Milliseconds', (value) => (value >= 10 ? String(Math.round(value)) : value.toFixed(1)))}
${line((p) => p.latencyMs.p50, 'p50')}${line((p) => p.latencyMs.p99, 'p99')}
</svg>`
}
