/**
 * The capacity chart (load-latency.svg): one panel per scenario, achieved rate on x, p50 and p99 latency
 * (log scale) on y, for optmark and the naive server side by side.
 *
 * How it reads at a glance (issue #19):
 * - The lines join only the steps the server kept up with (not saturated), in order of achieved rate, so
 *   a line never runs backwards. Saturated steps, which achieve less than they were offered and often
 *   less than an earlier step, are hollow markers off the line.
 * - The saturation point (the most any step achieved, once some step saturated) is a diamond on the p99
 *   level of that step and a dashed vertical line labelled with the rate.
 * - The legend sits in its own band inside each panel, above the plot, so it is never cut off and never
 *   covers data; the p99 target's label goes where it covers no point or line.
 * - A smoke run says so in a banner across the top and in each panel's title.
 *
 * The layout is computed first (chartLayout: every box in SVG pixels), then written out (chart); the
 * browser test (test/capacity-chart.test.ts) renders it in Chromium and checks the geometry.
 */
import type { LoadReport, ScenarioResult } from './report.js';
import type { StepResult } from './step.js';

export interface Box {
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface ChartPoint {
  x: number;
  y: number;
  r: number;
  achievedRps: number;
  offeredRps: number;
  latencyMs: number;
  quantile: 'p50' | 'p99';
  saturated: boolean;
}

export interface ChartSeries {
  target: string;
  colour: string;
  dashed: boolean;
  /** The unsaturated steps in order of achieved rate, per quantile: the lines. */
  lines: Record<'p50' | 'p99', ChartPoint[]>;
  /** Saturated steps: hollow markers, not on the lines. */
  saturated: ChartPoint[];
  /** Where the server saturated: the most any step achieved, when some step saturated. */
  saturation?: { achievedRps: number; x: number; y: number; label: Box & { text: string } };
}

export interface ChartPanel {
  scenario: string;
  title: string;
  box: Box;
  plot: Box;
  legend: Box;
  series: ChartSeries[];
  target: { ms: number; y: number; label: Box & { text: string } };
  xTicks: Array<{ value: number; x: number }>;
  yTicks: Array<{ value: number; y: number }>;
}

export interface ChartLayout {
  width: number;
  height: number;
  smoke: boolean;
  banner: (Box & { text: string }) | undefined;
  panels: ChartPanel[];
}

const PANEL_W = 440;
const PANEL_H = 360;
const BANNER_H = 26;
const FONT = 11;
/** Width of a character at 11 px sans-serif, generously (labels are placed with it; the test measures). */
const CHAR_W = 6.6;
const TITLE_H = 26;
const LEGEND_H = 40;
const PAD = { l: 58, r: 18, b: 42 };
const COLOURS: Record<string, string> = { optmark: '#1f6feb', naive: '#d9731a' };
const POINT_R = 2.6;
const SATURATED_R = 3.6;

const textWidth = (s: string): number => s.length * CHAR_W;

function intersects(a: Box, b: Box): boolean {
  return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

function inside(a: Box, b: Box): boolean {
  return a.x >= b.x && a.y >= b.y && a.x + a.w <= b.x + b.w && a.y + a.h <= b.y + b.h;
}

/** Boxes covering a polyline: one small box every few pixels along each segment. */
function lineBoxes(points: ChartPoint[]): Box[] {
  const boxes: Box[] = [];
  for (let i = 1; i < points.length; i++) {
    const a = points[i - 1]!;
    const b = points[i]!;
    const n = Math.max(1, Math.ceil(Math.hypot(b.x - a.x, b.y - a.y) / 3));
    for (let k = 0; k <= n; k++) boxes.push({ x: a.x + ((b.x - a.x) * k) / n - 1.5, y: a.y + ((b.y - a.y) * k) / n - 1.5, w: 3, h: 3 });
  }
  return boxes;
}

const pointBox = (p: ChartPoint): Box => ({ x: p.x - p.r - 1, y: p.y - p.r - 1, w: 2 * p.r + 2, h: 2 * p.r + 2 });

/** Picks the first candidate box inside `area` that meets no obstacle, else the one meeting the fewest. */
function place(candidates: Box[], obstacles: Box[], area: Box): Box {
  let best = candidates[0]!;
  let bestHits = Number.POSITIVE_INFINITY;
  for (const c of candidates) {
    if (!inside(c, area)) continue;
    const hits = obstacles.filter((o) => intersects(c, o)).length;
    if (hits === 0) return c;
    if (hits < bestHits) {
      best = c;
      bestHits = hits;
    }
  }
  return best;
}

function niceStep(raw: number): number {
  const p = 10 ** Math.floor(Math.log10(Math.max(raw, 1e-9)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

const measured = (steps: StepResult[]): StepResult[] => steps.filter((s) => s.latencyMs !== undefined && s.ok > 0);

function panel(r: LoadReport, name: string, series: ScenarioResult[], x0: number, y0: number): ChartPanel {
  const box: Box = { x: x0, y: y0, w: PANEL_W, h: PANEL_H };
  const plot: Box = { x: x0 + PAD.l, y: y0 + TITLE_H + LEGEND_H + 8, w: PANEL_W - PAD.l - PAD.r, h: 0 };
  plot.h = y0 + PANEL_H - PAD.b - plot.y;
  const legend: Box = { x: x0 + PAD.l, y: y0 + TITLE_H, w: PANEL_W - PAD.l - PAD.r, h: LEGEND_H };
  const target = r.settings.p99TargetMs;

  const all = series.flatMap((s) => measured(s.steps));
  // x from 0 to a round number a little past the highest achieved rate.
  const reach = Math.max(1, ...all.map((p) => p.achievedRps)) * 1.08;
  const step = niceStep(reach / 5);
  const maxX = Math.ceil(reach / step) * step;
  const lat = all.flatMap((p) => [p.latencyMs!.p50, p.latencyMs!.p99]).filter((v) => v > 0);
  const loY = 10 ** Math.floor(Math.log10(Math.max(0.1, Math.min(...lat, target))));
  const hiY = 10 ** Math.ceil(Math.log10(Math.max(...lat, target, loY * 10) * 1.5));
  const px = (v: number): number => plot.x + (v / maxX) * plot.w;
  const py = (v: number): number => plot.y + (1 - (Math.log10(Math.max(v, loY)) - Math.log10(loY)) / (Math.log10(hiY) - Math.log10(loY))) * plot.h;

  const xTicks: ChartPanel['xTicks'] = [];
  for (let v = 0; v <= maxX * 1.0001; v += step) xTicks.push({ value: Number(v.toFixed(6)), x: px(v) });
  const yTicks: ChartPanel['yTicks'] = [];
  for (let d = loY; d <= hiY * 1.0001; d *= 10) yTicks.push({ value: Number(d.toPrecision(3)), y: py(d) });

  const point = (s: StepResult, q: 'p50' | 'p99'): ChartPoint => ({
    x: px(s.achievedRps),
    y: py(s.latencyMs![q]),
    r: s.saturated ? SATURATED_R : POINT_R,
    achievedRps: s.achievedRps,
    offeredRps: s.offeredRps,
    latencyMs: s.latencyMs![q],
    quantile: q,
    saturated: s.saturated,
  });

  const out: ChartSeries[] = series.map((s) => {
    const steps = measured(s.steps);
    const kept = steps.filter((x) => !x.saturated).sort((a, b) => a.achievedRps - b.achievedRps || a.offeredRps - b.offeredRps);
    const saturatedSteps = steps.filter((x) => x.saturated);
    const one: ChartSeries = {
      target: s.target,
      colour: COLOURS[s.target] ?? '#555',
      dashed: s.target !== 'optmark',
      lines: { p50: kept.map((x) => point(x, 'p50')), p99: kept.map((x) => point(x, 'p99')) },
      saturated: saturatedSteps.flatMap((x) => [point(x, 'p50'), point(x, 'p99')]),
    };
    if (saturatedSteps.length > 0) {
      const peak = steps.reduce((a, b) => (b.achievedRps > a.achievedRps ? b : a));
      const text = `${s.target} saturates at ${peak.achievedRps.toPrecision(3)} req/s`;
      one.saturation = {
        achievedRps: peak.achievedRps,
        x: px(peak.achievedRps),
        y: py(peak.latencyMs!.p99),
        label: { x: 0, y: 0, w: textWidth(text), h: FONT + 3, text },
      };
    }
    return one;
  });

  // Obstacles for labels: every point and line.
  const obstacles: Box[] = out.flatMap((s) =>
    [...s.lines.p50, ...s.lines.p99, ...s.saturated].map(pointBox).concat(lineBoxes(s.lines.p50), lineBoxes(s.lines.p99)),
  );
  for (const s of out) if (s.saturation) obstacles.push({ x: s.saturation.x - 6, y: s.saturation.y - 6, w: 12, h: 12 });

  // Saturation labels: beside their vertical line, at the top of the plot, one row per series.
  let row = 0;
  for (const s of out) {
    if (!s.saturation) continue;
    const l = s.saturation.label;
    const y = plot.y + 2 + row * (l.h + 2);
    const right: Box = { x: s.saturation.x + 4, y, w: l.w, h: l.h };
    const left: Box = { x: s.saturation.x - 4 - l.w, y, w: l.w, h: l.h };
    const chosen = place([right, left], obstacles, plot);
    Object.assign(l, { x: chosen.x, y: chosen.y });
    obstacles.push({ ...chosen });
    row++;
  }

  // The p99 target's label: just above or below its line, at the right, left or middle of the plot.
  const text = `p99 target ${target} ms`;
  const w = textWidth(text);
  const h = FONT + 3;
  const ty = py(target);
  const xs = [plot.x + plot.w - w - 4, plot.x + 4, plot.x + (plot.w - w) / 2, plot.x + plot.w * 0.25, plot.x + plot.w * 0.6];
  const candidates = [...xs.map((x) => ({ x, y: ty - h - 2, w, h })), ...xs.map((x) => ({ x, y: ty + 2, w, h }))];
  const label = place(candidates, obstacles, plot);

  return {
    scenario: name,
    title: r.settings.smoke ? `${name} (smoke run)` : name,
    box,
    plot,
    legend,
    series: out,
    target: { ms: target, y: ty, label: { ...label, text } },
    xTicks,
    yTicks,
  };
}

/** Every box of the chart, in SVG pixels. */
export function chartLayout(r: LoadReport): ChartLayout {
  const names = [...new Set(r.scenarios.map((s) => s.scenario))];
  const smoke = r.settings.smoke;
  const top = smoke ? BANNER_H + 4 : 0;
  const width = Math.max(1, names.length) * PANEL_W;
  const banner = smoke
    ? {
        x: 0,
        y: 0,
        w: width,
        h: BANNER_H,
        text: 'SMOKE RUN: tiny image and short steps, to check that the load test works; not a capacity measurement',
      }
    : undefined;
  return {
    width,
    height: top + PANEL_H,
    smoke,
    banner,
    panels: names.map((name, i) =>
      panel(
        r,
        name,
        r.scenarios.filter((s) => s.scenario === name),
        i * PANEL_W,
        top,
      ),
    ),
  };
}

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const n1 = (v: number): string => v.toFixed(1);

function pathOf(points: ChartPoint[]): string {
  return points.map((p, k) => `${k ? 'L' : 'M'}${n1(p.x)},${n1(p.y)}`).join(' ');
}

function legendSvg(p: ChartPanel): string[] {
  const { x, y, w, h } = p.legend;
  const out = [`<g data-role="legend"><rect x="${n1(x)}" y="${n1(y)}" width="${n1(w)}" height="${n1(h)}" fill="#f7f7f7" stroke="#ccc"/>`];
  const r1 = y + 15;
  const r2 = y + 32;
  let cx = x + 8;
  for (const s of p.series) {
    const dash = s.dashed ? ' stroke-dasharray="5 3"' : '';
    out.push(`<line x1="${n1(cx)}" y1="${r1 - 4}" x2="${n1(cx + 22)}" y2="${r1 - 4}" stroke="${s.colour}" stroke-width="2.4"${dash}/>`);
    out.push(`<text x="${n1(cx + 26)}" y="${r1}">${esc(s.target)}</text>`);
    cx += 26 + textWidth(s.target) + 14;
  }
  out.push(`<text x="${n1(cx)}" y="${r1}" fill="#444">thick p99, thin p50</text>`);
  out.push(
    `<circle cx="${n1(x + 12)}" cy="${r2 - 4}" r="${SATURATED_R}" fill="#fff" stroke="#555"/><text x="${n1(x + 20)}" y="${r2}" fill="#444">saturated step</text>`,
  );
  const dx = x + 20 + textWidth('saturated step') + 14;
  out.push(
    `<path d="M${n1(dx)},${r2 - 8} l4,4 l-4,4 l-4,-4 z" fill="#555"/><line x1="${n1(dx + 8)}" y1="${r2 - 9}" x2="${n1(dx + 8)}" y2="${r2 + 1}" stroke="#555" stroke-dasharray="3 2"/><text x="${n1(dx + 14)}" y="${r2}" fill="#444">saturation point</text>`,
  );
  out.push('</g>');
  return out;
}

/** The SVG of the capacity chart. */
export function chart(r: LoadReport): string {
  const L = chartLayout(r);
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${L.width}" height="${L.height}" viewBox="0 0 ${L.width} ${L.height}" font-family="sans-serif" font-size="${FONT}" data-smoke="${L.smoke}">`,
  );
  parts.push('<rect width="100%" height="100%" fill="#fff"/>');
  if (L.banner) {
    const b = L.banner;
    parts.push(
      `<g data-role="smoke-banner"><rect x="${b.x}" y="${b.y}" width="${b.w}" height="${b.h}" fill="#fff3cd" stroke="#d9a400"/><text x="${b.w / 2}" y="${b.y + 17}" text-anchor="middle" font-weight="bold" fill="#7a5a00">${esc(b.text)}</text></g>`,
    );
  }
  for (const p of L.panels) {
    const { plot } = p;
    const bottom = plot.y + plot.h;
    parts.push(`<g data-role="panel" data-scenario="${esc(p.scenario)}">`);
    parts.push(`<rect data-role="panel-frame" x="${p.box.x}" y="${p.box.y}" width="${p.box.w}" height="${p.box.h}" fill="none" stroke="#eee"/>`);
    parts.push(`<text x="${n1(p.box.x + p.box.w / 2)}" y="${p.box.y + 18}" text-anchor="middle" font-size="13" font-weight="bold">${esc(p.title)}</text>`);
    parts.push(...legendSvg(p));
    // Grid, axes, ticks.
    for (const t of p.yTicks) {
      parts.push(`<line x1="${n1(plot.x)}" y1="${n1(t.y)}" x2="${n1(plot.x + plot.w)}" y2="${n1(t.y)}" stroke="#e3e3e3"/>`);
      parts.push(`<text x="${n1(plot.x - 5)}" y="${n1(t.y + 4)}" text-anchor="end">${t.value}</text>`);
    }
    for (const t of p.xTicks) parts.push(`<text x="${n1(t.x)}" y="${n1(bottom + 15)}" text-anchor="middle">${t.value}</text>`);
    parts.push(`<line x1="${n1(plot.x)}" y1="${n1(bottom)}" x2="${n1(plot.x + plot.w)}" y2="${n1(bottom)}" stroke="#333"/>`);
    parts.push(`<line x1="${n1(plot.x)}" y1="${n1(plot.y)}" x2="${n1(plot.x)}" y2="${n1(bottom)}" stroke="#333"/>`);
    parts.push(`<text x="${n1(plot.x + plot.w / 2)}" y="${n1(bottom + 32)}" text-anchor="middle">achieved rate (answered req/s)</text>`);
    const my = plot.y + plot.h / 2;
    parts.push(
      `<text x="${n1(p.box.x + 14)}" y="${n1(my)}" text-anchor="middle" transform="rotate(-90 ${n1(p.box.x + 14)} ${n1(my)})">latency, ms (log scale)</text>`,
    );
    // The p99 target.
    const t = p.target;
    parts.push(
      `<line data-role="target" x1="${n1(plot.x)}" y1="${n1(t.y)}" x2="${n1(plot.x + plot.w)}" y2="${n1(t.y)}" stroke="#c00" stroke-dasharray="2 3"/>`,
    );
    parts.push(`<text data-role="target-label" x="${n1(t.label.x)}" y="${n1(t.label.y + t.label.h - 3)}" fill="#c00">${esc(t.label.text)}</text>`);
    for (const s of p.series) {
      const dash = s.dashed ? ' stroke-dasharray="5 3"' : '';
      if (s.saturation) {
        const sat = s.saturation;
        parts.push(
          `<line data-role="saturation" x1="${n1(sat.x)}" y1="${n1(plot.y)}" x2="${n1(sat.x)}" y2="${n1(bottom)}" stroke="${s.colour}" stroke-dasharray="3 2" opacity="0.7"/>`,
        );
        parts.push(
          `<text data-role="saturation-label" x="${n1(sat.label.x)}" y="${n1(sat.label.y + sat.label.h - 3)}" fill="${s.colour}">${esc(sat.label.text)}</text>`,
        );
      }
      for (const [q, width] of [
        ['p50', 1.2],
        ['p99', 2.4],
      ] as const) {
        const line = s.lines[q];
        if (line.length > 1)
          parts.push(
            `<path data-role="line" data-target="${esc(s.target)}" data-quantile="${q}" d="${pathOf(line)}" fill="none" stroke="${s.colour}" stroke-width="${width}"${dash}/>`,
          );
        for (const pt of line)
          parts.push(`<circle data-role="point" data-quantile="${q}" cx="${n1(pt.x)}" cy="${n1(pt.y)}" r="${pt.r}" fill="${s.colour}" stroke="${s.colour}"/>`);
      }
      for (const pt of s.saturated) {
        parts.push(
          `<circle data-role="point" data-saturated="true" data-quantile="${pt.quantile}" cx="${n1(pt.x)}" cy="${n1(pt.y)}" r="${pt.r}" fill="#fff" stroke="${s.colour}" stroke-width="1.4"/>`,
        );
      }
      if (s.saturation) {
        const { x, y } = s.saturation;
        parts.push(`<path data-role="saturation-point" d="M${n1(x)},${n1(y - 6)} l6,6 l-6,6 l-6,-6 z" fill="${s.colour}" stroke="#fff"/>`);
      }
    }
    parts.push('</g>');
  }
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}
