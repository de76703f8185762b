/**
 * The attack list the fingerprint is judged on (bench/fingerprint-robustness.ts and the tests), all done
 * with sharp. Crops and resizes are given as area fractions, as in Stable Signature's evaluation.
 * `family` groups the rows of the robustness table; `ref` names the published attack beside it.
 */
import sharp, { type Sharp } from 'sharp';

export type Rng = () => number;
export type AttackFn = (buf: Buffer, rng: Rng) => Promise<Buffer>;

export interface Attack {
  name: string;
  family: string;
  fn: AttackFn;
}

async function dims(buf: Buffer): Promise<{ w: number; h: number }> {
  const m = await sharp(buf).metadata();
  return { w: m.width!, h: m.height! };
}

export const png = (s: Sharp): Promise<Buffer> => s.png({ compressionLevel: 1 }).toBuffer();

/** Crop keeping `area` of the area, same aspect, at a random (or given) position. */
export const crop =
  (area: number, at?: { x: number; y: number }): AttackFn =>
  async (buf, rng) => {
    const { w, h } = await dims(buf);
    const k = Math.sqrt(area);
    const cw = Math.round(w * k);
    const ch = Math.round(h * k);
    const fx = at ? at.x : rng();
    const fy = at ? at.y : rng();
    return png(sharp(buf).extract({ left: Math.round((w - cw) * fx), top: Math.round((h - ch) * fy), width: cw, height: ch }));
  };

/** Resize keeping `area` of the area (aspect kept). */
export const resizeArea =
  (area: number): AttackFn =>
  async (buf) => {
    const { w } = await dims(buf);
    return png(sharp(buf).resize(Math.round(w * Math.sqrt(area))));
  };

/** Change of aspect: width times fx, height kept. */
export const aspect =
  (fx: number): AttackFn =>
  async (buf) => {
    const { w, h } = await dims(buf);
    return png(sharp(buf).resize(Math.round(w * fx), h, { fit: 'fill' }));
  };

export const jpeg =
  (q: number, chroma: '4:2:0' | '4:4:4' = '4:2:0'): AttackFn =>
  async (buf) =>
    sharp(buf).jpeg({ quality: q, chromaSubsampling: chroma }).toBuffer();

/** Rotation on a background (the canvas grows to hold the whole picture). */
export const rotateBg =
  (deg: number, background = '#000000'): AttackFn =>
  async (buf) =>
    png(sharp(buf).rotate(deg, { background }));

/** Rotation, then the largest centred axis-aligned rectangle of the picture with its aspect (no background). */
export const rotateCrop =
  (deg: number): AttackFn =>
  async (buf) => {
    const { w, h } = await dims(buf);
    const rotated = await png(sharp(buf).rotate(deg, { background: '#808080' }));
    const { w: rw, h: rh } = await dims(rotated);
    const a = (Math.abs(deg) * Math.PI) / 180;
    // A w x h rectangle scaled by k fits inside the rotated picture when k (w cos + h sin) <= w and k (w sin + h cos) <= h.
    const k = Math.min(w / (w * Math.cos(a) + h * Math.sin(a)), h / (w * Math.sin(a) + h * Math.cos(a))) * 0.98;
    const cw = Math.floor(w * k);
    const ch = Math.floor(h * k);
    return png(sharp(rotated).extract({ left: Math.floor((rw - cw) / 2), top: Math.floor((rh - ch) / 2), width: cw, height: ch }));
  };

/** Border of `frac` of the side on every side (padding with a flat colour). */
export const border =
  (frac: number, background = '#ffffff'): AttackFn =>
  async (buf) => {
    const { w, h } = await dims(buf);
    const bx = Math.round(w * frac);
    const by = Math.round(h * frac);
    return png(sharp(buf).extend({ left: bx, right: bx, top: by, bottom: by, background }));
  };

export const borderPx =
  (px: number, background = '#000000'): AttackFn =>
  async (buf) =>
    png(sharp(buf).extend({ left: px, right: px, top: px, bottom: px, background }));

export const chain =
  (...steps: AttackFn[]): AttackFn =>
  async (buf, rng) => {
    let b = buf;
    for (const s of steps) b = await s(b, rng);
    return b;
  };

export const brightness =
  (k: number): AttackFn =>
  async (b) =>
    png(sharp(b).modulate({ brightness: k }));

const banner: AttackFn = async (buf) => {
  const { w, h } = await dims(buf);
  const bh = Math.round(h * 0.12);
  const svg = Buffer.from(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${bh}"><rect width="100%" height="100%" fill="#000" fill-opacity="0.55"/>` +
      `<text x="12" y="${Math.round(bh * 0.7)}" font-family="sans-serif" font-size="${Math.round(bh * 0.55)}" fill="#fff">Republished - all rights reserved</text></svg>`,
  );
  return png(sharp(buf).composite([{ input: svg, top: h - bh, left: 0 }]));
};

export const ATTACKS: Attack[] = [
  { name: 'none', family: 'none', fn: async (b) => b },
  { name: 'jpeg90', family: 'jpeg', fn: jpeg(90) },
  { name: 'jpeg80', family: 'jpeg', fn: jpeg(80) },
  { name: 'jpeg50', family: 'jpeg', fn: jpeg(50) },
  { name: 'jpeg30', family: 'jpeg', fn: jpeg(30) },
  { name: 'jpeg10', family: 'jpeg10', fn: jpeg(10) },
  { name: 'webp50', family: 'webp', fn: async (b) => sharp(b).webp({ quality: 50 }).toBuffer() },
  { name: 'resize0.5area', family: 'resize', fn: resizeArea(0.5) },
  { name: 'resize0.25area', family: 'resize', fn: resizeArea(0.25) },
  { name: 'resize0.1area', family: 'resize', fn: resizeArea(0.1) },
  { name: 'blur1', family: 'filter', fn: async (b) => png(sharp(b).blur(1)) },
  { name: 'sharpen', family: 'filter', fn: async (b) => png(sharp(b).sharpen({ sigma: 1.5 })) },
  { name: 'median3', family: 'filter', fn: async (b) => png(sharp(b).median(3)) },
  { name: 'brightness1.5', family: 'colour', fn: brightness(1.5) },
  { name: 'contrast1.5', family: 'colour', fn: async (b) => png(sharp(b).linear(1.5, -64)) },
  { name: 'gamma2', family: 'colour', fn: async (b) => png(sharp(b).gamma(2.2, 1.1)) },
  { name: 'saturation2', family: 'colour', fn: async (b) => png(sharp(b).modulate({ saturation: 2 })) },
  { name: 'grayscale', family: 'colour', fn: async (b) => png(sharp(b).grayscale()) },
  { name: 'text banner', family: 'overlay', fn: banner },
  { name: 'crop50 random', family: 'crop', fn: crop(0.5) },
  { name: 'crop25 random', family: 'crop', fn: crop(0.25) },
  { name: 'crop25 corner', family: 'crop', fn: async (b, r) => crop(0.25, { x: r() < 0.5 ? 0 : 1, y: r() < 0.5 ? 0 : 1 })(b, r) },
  { name: 'rotate2 bg', family: 'rotate', fn: rotateBg(2) },
  { name: 'rotate-5 bg', family: 'rotate', fn: rotateBg(-5, '#ffffff') },
  { name: 'rotate10 bg', family: 'rotate', fn: rotateBg(10) },
  { name: 'rotate5 crop', family: 'rotate', fn: rotateCrop(5) },
  { name: 'rotate-10 crop', family: 'rotate', fn: rotateCrop(-10) },
  { name: 'rot90', family: 'rot90/flip', fn: async (b) => png(sharp(b).rotate(90)) },
  { name: 'rot180', family: 'rot90/flip', fn: async (b) => png(sharp(b).rotate(180)) },
  { name: 'rot270', family: 'rot90/flip', fn: async (b) => png(sharp(b).rotate(270)) },
  { name: 'hflip', family: 'rot90/flip', fn: async (b) => png(sharp(b).flop()) },
  { name: 'vflip', family: 'rot90/flip', fn: async (b) => png(sharp(b).flip()) },
  { name: 'aspect1.25', family: 'aspect', fn: aspect(1.25) },
  { name: 'aspect0.75', family: 'aspect', fn: aspect(0.75) },
  { name: 'border10%', family: 'border', fn: border(0.1) },
  { name: 'border40px', family: 'border', fn: borderPx(40) },
  { name: 'crop50+bright1.5+jpeg80', family: 'chain', fn: chain(crop(0.5), brightness(1.5), jpeg(80)) },
  { name: 'resize1080w+jpeg80', family: 'chain', fn: async (b) => sharp(b).resize(1080).jpeg({ quality: 80, chromaSubsampling: '4:2:0' }).toBuffer() },
  { name: 'screenshot', family: 'chain', fn: chain(resizeArea(0.6), borderPx(24, '#202124')) },
];

/** The 5 x 3 grid of crop positions (corners, edge midpoints, centre, quarter points of the long rows). */
const GRID15 = [0, 0.5, 1].flatMap((y) => [0, 0.25, 0.5, 0.75, 1].map((x) => ({ x, y })));
/** The 3 x 3 grid (corners, edge midpoints, centre). */
const GRID9 = [0, 0.5, 1].flatMap((y) => [0, 0.5, 1].map((x) => ({ x, y })));
const at = (p: { x: number; y: number }): string => `${p.x},${p.y}`;

/**
 * The denser test of point 1 (`--dense`, added to ATTACKS): crops at fixed positions and changes of aspect,
 * each a family of its own so that the rows stay apart from the bench's 39.
 */
export const DENSE_ATTACKS: Attack[] = [
  ...GRID15.map((p) => ({ name: `crop25@${at(p)}`, family: 'crop25 x15', fn: crop(0.25, p) })),
  ...GRID9.map((p) => ({ name: `crop50@${at(p)}`, family: 'crop50 x9', fn: crop(0.5, p) })),
  ...GRID15.map((p) => ({ name: `crop50+b1.5+j80@${at(p)}`, family: 'chain x15', fn: chain(crop(0.5, p), brightness(1.5), jpeg(80)) })),
  ...[0.75, 0.8, 0.85, 0.9, 0.95, 0.98, 1.02, 1.05, 1.1, 1.15, 1.2, 1.25].map((f) => ({ name: `aspect${f}`, family: 'aspect x12', fn: aspect(f) })),
];

/** Resize so that the short side is `px` (aspect kept). */
export const resizeShort =
  (px: number): AttackFn =>
  async (buf) => {
    const { w, h } = await dims(buf);
    const k = px / Math.min(w, h);
    return png(sharp(buf).resize(Math.round(w * k), Math.round(h * k), { fit: 'fill' }));
  };

/** Resize to `width` px wide (aspect kept), then JPEG at `q` 4:2:0. */
export const resizeWidthJpeg =
  (width: number, q: number): AttackFn =>
  async (buf) =>
    sharp(buf).resize(width).jpeg({ quality: q, chromaSubsampling: '4:2:0' }).toBuffer();

/** Padding of given fractions of the width (left, right) and height (top, bottom) in a flat colour. */
export const pad =
  (p: { left?: number; right?: number; top?: number; bottom?: number }, background = '#ffffff'): AttackFn =>
  async (buf) => {
    const { w, h } = await dims(buf);
    const px = (f: number | undefined, side: number): number => Math.round((f ?? 0) * side);
    return png(sharp(buf).extend({ left: px(p.left, w), right: px(p.right, w), top: px(p.top, h), bottom: px(p.bottom, h), background }));
  };

/** Rotation over a blurred, stretched copy of the picture (what phone apps put behind a rotated photo). */
export const rotateBlurred =
  (deg: number): AttackFn =>
  async (buf) => {
    const rotated = await sharp(buf)
      .rotate(deg, { background: { r: 0, g: 0, b: 0, alpha: 0 } })
      .png()
      .toBuffer();
    const { w, h } = await dims(rotated);
    const back = await sharp(buf).resize(w, h, { fit: 'fill' }).blur(12).png().toBuffer();
    return png(sharp(back).composite([{ input: rotated }]));
  };

/** Crop to the largest centred frame of aspect `ax:ay` (a square, a phone story), then `fx`/`fy` from the centre. */
export const cropFrame =
  (ax: number, ay: number, fx = 0.5, fy = 0.5): AttackFn =>
  async (buf) => {
    const { w, h } = await dims(buf);
    const k = Math.min(w / ax, h / ay);
    const cw = Math.floor(ax * k);
    const ch = Math.floor(ay * k);
    return png(sharp(buf).extract({ left: Math.round((w - cw) * fx), top: Math.round((h - ch) * fy), width: cw, height: ch }));
  };

/** Change of aspect on the height: height times fy, width kept. */
export const aspectY =
  (fy: number): AttackFn =>
  async (buf) => {
    const { w, h } = await dims(buf);
    return png(sharp(buf).resize(w, Math.round(h * fy), { fit: 'fill' }));
  };

const rot90 =
  (deg: 90 | 180 | 270): AttackFn =>
  async (b) =>
    png(sharp(b).rotate(deg));
const flop: AttackFn = async (b) => png(sharp(b).flop());
const flip: AttackFn = async (b) => png(sharp(b).flip());
const screenshot = (area: number, frame: number, q?: number): AttackFn => chain(resizeArea(area), borderPx(frame, '#202124'), ...(q ? [jpeg(q)] : []));

const ANGLES = [-10, -9, -8, -7.5, -7, -6, -5, -4, -3, -2, -1, -0.5, 0.5, 1, 2, 3, 4, 5, 6, 7, 7.5, 8, 9, 10];
const BACKGROUNDS = ['#000000', '#ffffff', '#808080', '#3a6ea5'];

/**
 * The sweep of point 1 (`--sweep`, added to ATTACKS): every kind the issue names at values across its range
 * that the bench's 39 and `--dense` do not test, each kind a family of its own.
 */
export const SWEEP_ATTACKS: Attack[] = [
  ...ANGLES.map((d) => ({ name: `rotate${d} crop`, family: 'rot crop', fn: rotateCrop(d) })),
  ...ANGLES.map((d, i) => ({ name: `rotate${d} bg${BACKGROUNDS[i % 4]}`, family: 'rot bg', fn: rotateBg(d, BACKGROUNDS[i % 4]) })),
  ...[-10, -6, -3, -1, 2, 4.5, 8, 10].map((d) => ({ name: `rotate${d} blurred`, family: 'rot blurred', fn: rotateBlurred(d) })),
  ...[0.01, 0.025, 0.05, 0.075].map((f) => ({ name: `border${f * 100}%`, family: 'border x9', fn: border(f) })),
  ...[0.02, 0.05, 0.1].map((f) => ({ name: `border${f * 100}% black`, family: 'border x9', fn: border(f, '#000000') })),
  { name: 'border6% grey', family: 'border x9', fn: border(0.06, '#7f7f7f') },
  { name: 'border8% red', family: 'border x9', fn: border(0.08, '#c0392b') },
  ...[0.03, 0.1].flatMap((f) => [
    { name: `pad left ${f * 100}%`, family: 'pad 1 side', fn: pad({ left: f }) },
    { name: `pad top ${f * 100}% black`, family: 'pad 1 side', fn: pad({ top: f }, '#000000') },
    { name: `pad right ${f * 100}% grey`, family: 'pad 1 side', fn: pad({ right: f }, '#808080') },
    { name: `pad bottom ${f * 100}%`, family: 'pad 1 side', fn: pad({ bottom: f }) },
  ]),
  ...[0.05, 0.1].map((f) => ({ name: `letterbox ${f * 100}%`, family: 'letterbox', fn: pad({ top: f, bottom: f }, '#000000') })),
  ...[0.05, 0.1].map((f) => ({ name: `pillarbox ${f * 100}%`, family: 'letterbox', fn: pad({ left: f, right: f }, '#000000') })),
  { name: 'pad 2/10/7/4%', family: 'letterbox', fn: pad({ left: 0.02, right: 0.1, top: 0.07, bottom: 0.04 }, '#ffffff') },
  ...[0.9, 0.75, 0.6, 0.4, 0.3, 0.2, 0.15, 0.12].map((a) => ({ name: `resize${a}area`, family: 'resize x10', fn: resizeArea(a) })),
  ...[0.37, 0.613].map((a) => ({ name: `resize${a}area`, family: 'resize x10', fn: resizeArea(a) })),
  ...[128, 160, 200].map((px) => ({ name: `resize short ${px}`, family: 'small', fn: resizeShort(px) })),
  {
    name: 'resize0.3 nearest',
    family: 'small',
    fn: async (b) => png(sharp(b).resize(Math.round((await dims(b)).w * Math.sqrt(0.3)), undefined, { kernel: 'nearest' })),
  },
  { name: 'resize short 144+jpeg75', family: 'small', fn: chain(resizeShort(144), jpeg(75)) },
  { name: 'rot90+crop50', family: 'rot90/flip+', fn: chain(rot90(90), crop(0.5, { x: 0.3, y: 0.7 })) },
  { name: 'rot270+jpeg70', family: 'rot90/flip+', fn: chain(rot90(270), jpeg(70)) },
  { name: 'rot180+resize0.3', family: 'rot90/flip+', fn: chain(rot90(180), resizeArea(0.3)) },
  { name: 'hflip+crop25', family: 'rot90/flip+', fn: chain(flop, crop(0.25, { x: 0.5, y: 0.5 })) },
  { name: 'hflip+jpeg50', family: 'rot90/flip+', fn: chain(flop, jpeg(50)) },
  { name: 'vflip+crop50+jpeg80', family: 'rot90/flip+', fn: chain(flip, crop(0.5, { x: 1, y: 0 }), jpeg(80)) },
  { name: 'rot90+hflip', family: 'rot90/flip+', fn: chain(rot90(90), flop) },
  ...[0.78, 0.88, 1.12, 1.22].map((f) => ({ name: `aspect${f}+jpeg75`, family: 'aspect+jpeg', fn: chain(aspect(f), jpeg(75)) })),
  ...[0.8, 0.9, 1.1, 1.25].map((f) => ({ name: `aspectY${f}`, family: 'aspect+jpeg', fn: aspectY(f) })),
  ...[1080, 720, 512].flatMap((w) => [70, 85].map((q) => ({ name: `resize${w}w+jpeg${q}`, family: 'chain size', fn: resizeWidthJpeg(w, q) }))),
  { name: 'screenshot 0.3 8px', family: 'chain shot', fn: screenshot(0.3, 8) },
  { name: 'screenshot 0.5 40px', family: 'chain shot', fn: screenshot(0.5, 40) },
  { name: 'screenshot 0.8 16px', family: 'chain shot', fn: screenshot(0.8, 16) },
  { name: 'screenshot 0.6 24px jpeg85', family: 'chain shot', fn: screenshot(0.6, 24, 85) },
  { name: 'screenshot 0.4 60px jpeg75', family: 'chain shot', fn: screenshot(0.4, 60, 75) },
  ...[
    [-10, 75],
    [7.5, 75],
    [-5, 60],
    [3, 85],
  ].map(([d, q]) => ({ name: `rotate${d} crop+jpeg${q}`, family: 'rot chain', fn: chain(rotateCrop(d!), jpeg(q!)) })),
  { name: 'rotate10 bg+resize0.5+jpeg80', family: 'rot chain', fn: chain(rotateBg(10, '#ffffff'), resizeArea(0.5), jpeg(80)) },
  { name: 'rotate-8 blurred+jpeg80', family: 'rot chain', fn: chain(rotateBlurred(-8), jpeg(80)) },
  { name: 'rotate4 crop+crop50', family: 'rot chain', fn: chain(rotateCrop(4), crop(0.5, { x: 0.8, y: 0.2 })) },
  { name: 'border10%+jpeg70', family: 'pad chain', fn: chain(border(0.1), jpeg(70)) },
  { name: 'pad left 10%+jpeg80', family: 'pad chain', fn: chain(pad({ left: 0.1 }), jpeg(80)) },
  { name: 'letterbox10%+resize0.5+jpeg80', family: 'pad chain', fn: chain(pad({ top: 0.1, bottom: 0.1 }, '#000000'), resizeArea(0.5), jpeg(80)) },
  { name: 'border10% blurred', family: 'pad chain', fn: chain(border(0.1, '#000000'), rotateBlurred(0)) },
  { name: 'aspect0.75+jpeg70', family: 'aspect chain', fn: chain(aspect(0.75), jpeg(70)) },
  { name: 'aspect1.25+jpeg70', family: 'aspect chain', fn: chain(aspect(1.25), jpeg(70)) },
  { name: 'aspectY0.75+jpeg80', family: 'aspect chain', fn: chain(aspectY(0.75), jpeg(80)) },
  { name: 'aspect0.85+resize0.3', family: 'aspect chain', fn: chain(aspect(0.85), resizeArea(0.3)) },
  { name: 'aspect0.85+crop50', family: 'aspect chain', fn: chain(aspect(0.85), crop(0.5, { x: 0.5, y: 0.5 })) },
  { name: 'aspect1.15+rotate3 crop', family: 'aspect chain', fn: chain(aspect(1.15), rotateCrop(3)) },
  { name: 'resize short 128+jpeg70', family: 'small chain', fn: chain(resizeShort(128), jpeg(70)) },
  { name: 'resize short 128+jpeg50', family: 'small chain', fn: chain(resizeShort(128), jpeg(50)) },
  { name: 'resize0.1area+jpeg75', family: 'small chain', fn: chain(resizeArea(0.1), jpeg(75)) },
  { name: 'resize short 128+border5%', family: 'small chain', fn: chain(resizeShort(128), border(0.05, '#000000')) },
  ...[
    [1, 1, 0.5],
    [1, 1, 0],
    [9, 16, 0.5],
    [9, 16, 1],
    [4, 5, 0.3],
  ].map(([ax, ay, f]) => ({ name: `frame ${ax}:${ay}@${f}`, family: 'crop frame', fn: cropFrame(ax!, ay!, f, f) })),
];

/**
 * Attacks on large photographs (`--sweep`: a few of the photographs upscaled to 12 MP before marking, as real
 * uploads are): the kinds at one value each.
 */
export const BIG_ATTACKS: Attack[] = [
  { name: '12MP jpeg80', family: '12 MP', fn: jpeg(80) },
  { name: '12MP resize1080w+jpeg80', family: '12 MP', fn: resizeWidthJpeg(1080, 80) },
  { name: '12MP resize2048w+jpeg85', family: '12 MP', fn: resizeWidthJpeg(2048, 85) },
  { name: '12MP crop25@0.5,0.5', family: '12 MP', fn: crop(0.25, { x: 0.5, y: 0.5 }) },
  { name: '12MP crop50@0,1+jpeg80', family: '12 MP', fn: chain(crop(0.5, { x: 0, y: 1 }), jpeg(80)) },
  { name: '12MP rotate-4 crop', family: '12 MP', fn: rotateCrop(-4) },
  { name: '12MP rotate7 bg', family: '12 MP', fn: rotateBg(7) },
  { name: '12MP border5%', family: '12 MP', fn: border(0.05) },
  { name: '12MP aspect0.8', family: '12 MP', fn: aspect(0.8) },
  { name: '12MP rot90', family: '12 MP', fn: rot90(90) },
  { name: '12MP screenshot 0.1', family: '12 MP', fn: screenshot(0.1, 24) },
  { name: '12MP rotate10 crop+resize1080w+jpeg80', family: '12 MP', fn: chain(rotateCrop(10), resizeWidthJpeg(1080, 80)) },
  { name: '12MP crop25@0,0+jpeg80', family: '12 MP', fn: chain(crop(0.25, { x: 0, y: 0 }), jpeg(80)) },
  { name: '12MP border10%+resize1080w+jpeg80', family: '12 MP', fn: chain(border(0.1), resizeWidthJpeg(1080, 80)) },
  { name: '12MP aspect1.2+jpeg75', family: '12 MP', fn: chain(aspect(1.2), jpeg(75)) },
];
