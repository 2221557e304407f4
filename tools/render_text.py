#!/usr/bin/python3
"""Renders real text with Debian fonts into PP-OCR model inputs (tools/ocr_accuracy.py).

Text lines (English words, dates, prices, IDs, times, addresses and, when a CJK font is
installed, Chinese phrases) are drawn with DejaVu Sans/Serif/Mono and Noto CJK in several
sizes and styles on plain, gradient, noisy and blotchy backgrounds, then sometimes rotated a
little, blurred and JPEG-compressed. Everything comes from one numpy Generator: the same
seed, fonts and Pillow give the same bytes.

  rec  one line cropped as a detector would, PaddleOCR RecResizeImg: height 48, width kept
       up to 320 (wider lines squeezed), padded on the right with 0 after
       (x/255 - 0.5) / 0.5; [N,3,48,320] float32.
  cls  the same at 48x192; every other line turned by 180 degrees (label 1).
  det  a page (sides multiples of 32) holding several lines and some form rules, ImageNet
       mean/std on [0,1]; [N,3,H,W] float32.

As a script: render_text.py rec|cls|det OUT_DIR [--count N] [--seed S] [--size HxW]
[--avoid LABELS.json] writes OUT_DIR/<kind>.npy, OUT_DIR/<kind>_labels.json and a few PNGs to
look at; --avoid leaves out the texts of another set's labels.
"""
import argparse
import io
import json
import math
import os

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

DEJAVU = "/usr/share/fonts/truetype/dejavu"
NOTO = "/usr/share/fonts/opentype/noto"
LATIN_FONTS = ["DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSans-Oblique.ttf", "DejaVuSansCondensed.ttf",
               "DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf", "DejaVuSerif-Italic.ttf", "DejaVuSerifCondensed.ttf",
               "DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf"]
# Index 2 of the Noto CJK collections is the Simplified Chinese face.
CJK_FONTS = ["NotoSansCJK-Regular.ttc", "NotoSansCJK-Bold.ttc", "NotoSerifCJK-Regular.ttc", "NotoSerifCJK-Bold.ttc"]
CJK_INDEX = 2

WORDS = """account address after again airport answer apple april area around august autumn
available balance bank basket battery beach before between bicycle birthday black blue board
book border bottle bread breakfast bridge brown budget building business butter cabinet camera
capital carbon career center chair change charge cheese chicken church circle city class clean
client clock closed coffee color company computer contact corner cotton country credit culture
customer daily danger dealer december delivery dental design desk dinner direct discount doctor
double dozen driver early east economy editor effect eight electric energy engine entrance
evening exit express factory family farmer february fifteen final finance first floor flower
forest forward fresh friday garden general gift glass golden green ground guest health heavy
history holiday hotel house hundred income insurance island january journal july june kitchen
label language large launch letter library light limited local london lunch machine market
medium member menu metal middle minute modern monday money monthly morning mountain museum
music national nature network night north notice number october office official online open
orange order paper parking partner payment pepper phone picture plastic please pocket police
post power premium press price print private product public purple quality quarter queen
question quick radio rain receipt record region rental report restaurant result return river
road room route sale salt saturday school science second section september service seven
shipping shop silver simple single small smart south special sport spring square station
steel stock store street student summer sunday supply support system table tax taxi teacher
team ticket today total tower town traffic train travel tuesday twelve union unit update valley
value village visitor wallet warning water weather wednesday weekly welcome west white window
winter wireless yellow yesterday young zone""".split()

CJK_PHRASES = """欢迎光临 营业时间 北京市海淀区 上海市浦东新区 广州市天河区 人民币 发票号码 合计金额
中华人民共和国 电话号码 联系地址 出口 入口 禁止吸烟 注意安全 停车场 超市 中国银行 人民医院
第一中学 图书馆 火车站 大饭店 今天天气很好 谢谢惠顾 欢迎再次光临 会员卡 收银员 找零 实收
应付金额 优惠券 折扣价 原价 特价商品 新鲜水果 有机蔬菜 生产日期 保质期 净含量 配料表 产地
使用说明 安全出口 紧急电话 地铁站 公交车站 飞机场 候车室 售票处 服务中心 客户服务 营业执照
统一社会信用代码 开户银行 账号 身份证号 姓名 性别 出生日期 民族 住址 有效期限 签发机关
快递单号 收件人 寄件人 订单编号 数量 单价 金额 小计 备注 日期 星期一 星期五 上午 下午
晚上 春节快乐 中秋节 国庆节 生日快乐 恭喜发财 万事如意 学习 工作 生活 健康 幸福 和平
发展 科技 创新 教育 文化 经济 社会 环境 保护 交通 旅游 美食 咖啡 牛奶 面包 米饭 饺子""".split()

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
STREETS = ["Main St", "Oak Ave", "Park Rd", "High St", "Elm St", "Lake Dr", "Hill Rd", "Mill Ln"]

# Kinds of line and their weights; the CJK kinds drop out without a CJK font.
LATIN_KINDS = {"words": 5, "date": 2, "price": 2, "id": 2, "time": 1, "phone": 1, "address": 1, "email": 1}
CJK_KINDS = {"cjk": 4, "cjk_mixed": 2}


def _pick(rng, items):
    return items[int(rng.integers(len(items)))]


def _digits(rng, n):
    return "".join(str(int(d)) for d in rng.integers(0, 10, n))


def _word_case(rng, word):
    r = rng.random()
    return word.upper() if r < 0.2 else word.capitalize() if r < 0.6 else word


def make_text(rng, kind):
    """One line of the given kind."""
    year, month, day = int(rng.integers(1990, 2031)), int(rng.integers(1, 13)), int(rng.integers(1, 29))
    if kind == "words":
        return " ".join(_word_case(rng, _pick(rng, WORDS)) for _ in range(int(rng.integers(1, 4))))
    if kind == "date":
        forms = ["%04d-%02d-%02d" % (year, month, day), "%02d/%02d/%04d" % (day, month, year),
                 "%s %d, %d" % (MONTHS[month - 1], day, year), "Date: %04d.%02d.%02d" % (year, month, day),
                 "%d %s %d" % (day, MONTHS[month - 1].upper(), year)]
        return _pick(rng, forms)
    if kind == "price":
        value = float(rng.integers(1, 200000)) / 100.0
        amount = "{:,.2f}".format(value)
        forms = ["$" + amount, "USD " + amount, "Total: $" + amount, "%s $%s" % (_pick(rng, WORDS).capitalize(), amount),
                 "Price %s" % amount, "-%s%%" % int(rng.integers(5, 80)), "x%d @ %.2f" % (int(rng.integers(1, 20)), value)]
        return _pick(rng, forms)
    if kind == "id":
        letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
        code = "".join(letters[int(i)] if rng.random() < 0.5 else str(int(i) % 10) for i in rng.integers(0, 24, 8))
        forms = ["INV-%d-%s" % (year, _digits(rng, 4)), "SN " + code, "No. " + _digits(rng, 6),
                 "ID %s %s" % (_digits(rng, 4), _digits(rng, 4)), "Order #" + _digits(rng, 7),
                 "%s-%s" % (code[:3], _digits(rng, 5)), "REF:" + code]
        return _pick(rng, forms)
    if kind == "time":
        h, m, s = int(rng.integers(0, 24)), int(rng.integers(0, 60)), int(rng.integers(0, 60))
        return _pick(rng, ["%02d:%02d" % (h, m), "%02d:%02d:%02d" % (h, m, s), "Open %02d:00-%02d:30" % (h % 12 + 6, h % 6 + 17)])
    if kind == "phone":
        return _pick(rng, ["Tel: %s-%s-%s" % (_digits(rng, 3), _digits(rng, 3), _digits(rng, 4)),
                           "+86 %s %s %s" % (_digits(rng, 3), _digits(rng, 4), _digits(rng, 4)),
                           "(%s) %s-%s" % (_digits(rng, 3), _digits(rng, 3), _digits(rng, 4))])
    if kind == "address":
        return "%d %s" % (int(rng.integers(1, 2000)), _pick(rng, STREETS))
    if kind == "email":
        return "%s.%s@%s.com" % (_pick(rng, WORDS), _pick(rng, WORDS)[:4], _pick(rng, ["mail", "shop", "corp", "news"]))
    if kind == "cjk":
        return "".join(_pick(rng, CJK_PHRASES) for _ in range(int(rng.integers(1, 3))))
    if kind == "cjk_mixed":
        value = float(rng.integers(1, 100000)) / 100.0
        return _pick(rng, ["%s：%.2f元" % (_pick(rng, CJK_PHRASES), value), "%d年%d月%d日" % (year, month, day),
                           "%s %s" % (_pick(rng, CJK_PHRASES), _digits(rng, int(rng.integers(4, 9)))),
                           "电话：%s-%s" % (_digits(rng, 3), _digits(rng, 8)), "￥%.2f" % value])
    raise ValueError("unknown text kind " + kind)


class Fonts:
    """The installed fonts, loaded once per (file, size)."""

    def __init__(self):
        self.latin = [os.path.join(DEJAVU, f) for f in LATIN_FONTS if os.path.exists(os.path.join(DEJAVU, f))]
        self.cjk = [os.path.join(NOTO, f) for f in CJK_FONTS if os.path.exists(os.path.join(NOTO, f))]
        if not self.latin:
            raise RuntimeError("no DejaVu fonts under %s (Debian package fonts-dejavu-core)" % DEJAVU)
        self._cache = {}

    def get(self, path, size):
        key = (path, size)
        if key not in self._cache:
            index = CJK_INDEX if path.endswith(".ttc") else 0
            # The basic layout engine: no dependence on whether libraqm is installed.
            self._cache[key] = ImageFont.truetype(path, size, index=index, layout_engine=ImageFont.Layout.BASIC)
        return self._cache[key]

    def pick(self, rng, text):
        """A font that has every glyph of the text: CJK text needs Noto CJK, Latin may use both."""
        cjk_text = any(ord(c) > 0x2000 for c in text)
        if cjk_text:
            return _pick(rng, self.cjk)
        if self.cjk and rng.random() < 0.2:
            return _pick(rng, self.cjk)
        return _pick(rng, self.latin)

    def kinds(self):
        kinds = dict(LATIN_KINDS)
        if self.cjk:
            kinds.update(CJK_KINDS)
        return kinds


def _paper_color(rng):
    """Off-white to mid gray, slightly tinted."""
    return rng.uniform(175, 250) + rng.uniform(-18, 12, 3)


def background(rng, h, w):
    """A light background: plain, gradient, noisy or blotchy (low-frequency noise); float HxWx3."""
    style = _pick(rng, ["plain", "gradient", "noise", "blotch"])
    base = _paper_color(rng)
    img = np.broadcast_to(base, (h, w, 3)).astype(np.float64)
    if style == "gradient":
        other = _paper_color(rng)
        angle = rng.uniform(0, 2 * math.pi)
        yy, xx = np.mgrid[0:h, 0:w]
        t = (xx * math.cos(angle) + yy * math.sin(angle))
        t = (t - t.min()) / max(t.max() - t.min(), 1.0)
        img = base * (1 - t[..., None]) + other * t[..., None]
    elif style == "blotch":
        coarse = rng.normal(0, 18, (max(2, h // 24), max(2, w // 24), 1))
        blot = np.asarray(Image.fromarray(coarse[..., 0].astype(np.float32), mode="F").resize((w, h), Image.BICUBIC))
        img = img + blot[..., None]
    if style in ("noise", "blotch") or rng.random() < 0.3:
        img = img + rng.normal(0, rng.uniform(3, 14), (h, w, 1)) + rng.normal(0, 2, (h, w, 3))
    return img


def _ink(rng, bg_mean):
    """A text color well away from the background."""
    if rng.random() < 0.25:
        dark = np.array([rng.uniform(0, 60), rng.uniform(0, 60), rng.uniform(60, 140)])  # blue/red/green ink
        return tuple(int(v) for v in rng.permutation(dark))
    gray = rng.uniform(0, 90)
    return (int(gray), int(gray), int(gray))


def degrade(rng, img, blur=0.4, jpeg=0.4):
    """Slight blur and JPEG artifacts, each with its probability."""
    if rng.random() < blur:
        img = img.filter(ImageFilter.GaussianBlur(radius=float(rng.uniform(0.3, 1.1))))
    if rng.random() < jpeg:
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=int(rng.integers(25, 85)))
        img = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    return img


def render_line(rng, fonts, text):
    """One text line as a detector crop would give it: an RGB PIL image."""
    size = int(rng.integers(18, 44))
    font = fonts.get(fonts.pick(rng, text), size)
    left, top, right, bottom = font.getbbox(text)
    tw, th = right - left, bottom - top
    mx, mt, mb = int(rng.integers(2, size // 2 + 3)), int(rng.integers(1, size // 3 + 3)), int(rng.integers(1, size // 3 + 3))
    w, h = tw + 2 * mx, th + mt + mb
    inverted = rng.random() < 0.1
    bg = background(rng, h, w)
    if inverted:
        bg = 255.0 - bg
    img = Image.fromarray(np.clip(bg, 0, 255).astype(np.uint8), "RGB")
    ink = _ink(rng, bg.mean())
    if inverted:
        ink = tuple(255 - c for c in ink)
    ImageDraw.Draw(img).text((mx - left, mt - top), text, font=font, fill=ink)
    if rng.random() < 0.3:
        fill = tuple(int(c) for c in np.clip(bg.mean(axis=(0, 1)), 0, 255))
        img = img.rotate(float(rng.uniform(-2.0, 2.0)), resample=Image.BICUBIC, fillcolor=fill)
    return degrade(rng, img)


def resize_norm(img, height, width):
    """PaddleOCR's resize_norm_img: keep the ratio up to `width`, (x/255-0.5)/0.5, pad right with 0."""
    ratio = img.width / float(img.height)
    resized_w = min(width, int(math.ceil(height * ratio)))
    arr = np.asarray(img.resize((resized_w, height), Image.BILINEAR), dtype=np.float32)
    arr = (arr.transpose(2, 0, 1) / 255.0 - 0.5) / 0.5
    out = np.zeros((3, height, width), dtype=np.float32)
    out[:, :, :resized_w] = arr
    return out


def _texts(rng, fonts, avoid):
    kinds = fonts.kinds()
    names, weights = list(kinds), np.array(list(kinds.values()), dtype=np.float64)
    while True:
        text = make_text(rng, names[int(rng.choice(len(names), p=weights / weights.sum()))])
        if text not in avoid:
            yield text


def render_lines(kind, count, seed, avoid=()):
    """rec or cls samples: (array [N,3,48,W], labels, preview images). `avoid`: texts not to use."""
    height, width = 48, 320 if kind == "rec" else 192
    # Lines much wider than the input are squeezed past legibility; PaddleOCR would widen
    # the input instead, which a static-shape model cannot.
    max_ratio = width / height * (1.25 if kind == "rec" else 1.8)
    rng = np.random.default_rng(seed)
    fonts = Fonts()
    texts = _texts(rng, fonts, set(avoid))
    samples, labels, previews = [], [], []
    while len(samples) < count:
        text = next(texts)
        img = render_line(rng, fonts, text)
        if img.width / img.height > max_ratio:
            continue
        label = {"text": text}
        if kind == "cls":
            label["angle"] = 180 if len(samples) % 2 else 0
            if label["angle"]:
                img = img.rotate(180)
        samples.append(resize_norm(img, height, width))
        labels.append(label)
        previews.append(img)
    return np.stack(samples), labels, previews


def _rule(rng, draw, w, h):
    """A table rule or box, as on forms and receipts."""
    color = tuple(int(c) for c in rng.integers(60, 160, 3))
    if rng.random() < 0.5:
        y = int(rng.integers(0, h))
        draw.line([(int(rng.integers(0, w // 4)), y), (int(rng.integers(3 * w // 4, w)), y)], fill=color, width=int(rng.integers(1, 3)))
    else:
        x0, y0 = int(rng.integers(0, w // 2)), int(rng.integers(0, h // 2))
        draw.rectangle([x0, y0, x0 + int(rng.integers(40, w // 2)), y0 + int(rng.integers(30, h // 2))], outline=color, width=1)


def render_page(rng, fonts, texts, h, w):
    """A page of several non-overlapping lines; returns (image, [{text, box}])."""
    bg = background(rng, h, w)
    img = Image.fromarray(np.clip(bg, 0, 255).astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(0, 4))):
        _rule(rng, draw, w, h)
    placed = []
    target = int(rng.integers(4, 4 + max(2, h * w // 30000)))
    attempts = 0
    while len(placed) < target and attempts < target * 12:
        attempts += 1
        text = next(texts)
        size = int(rng.integers(max(12, h // 40), max(16, h // 14)))
        font = fonts.get(fonts.pick(rng, text), size)
        left, top, right, bottom = font.getbbox(text)
        tw, th = right - left, bottom - top
        if tw >= w - 8 or th >= h - 8:
            continue
        x, y = int(rng.integers(4, w - tw - 3)), int(rng.integers(4, h - th - 3))
        box = (x - 3, y - 3, x + tw + 3, y + th + 3)
        if any(not (box[2] <= b[0] or b[2] <= box[0] or box[3] <= b[1] or b[3] <= box[1]) for b in (p["box"] for p in placed)):
            continue
        draw.text((x - left, y - top), text, font=font, fill=_ink(rng, 0))
        placed.append({"text": text, "box": list(box)})
    if rng.random() < 0.3:
        img = img.rotate(float(rng.uniform(-1.5, 1.5)), resample=Image.BICUBIC,
                         fillcolor=tuple(int(c) for c in np.clip(bg.mean(axis=(0, 1)), 0, 255)))
    return degrade(rng, img, blur=0.3, jpeg=0.4), placed


IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def render_pages(count, seed, size, avoid=()):
    """det samples at one size (h, w): (array [N,3,h,w], labels, preview images)."""
    h, w = size
    if h % 32 or w % 32:
        raise ValueError("det page sides must be multiples of 32, got %dx%d" % (h, w))
    rng = np.random.default_rng(seed)
    fonts = Fonts()
    texts = _texts(rng, fonts, set(avoid))
    samples, labels, previews = [], [], []
    for _ in range(count):
        img, placed = render_page(rng, fonts, texts, h, w)
        arr = (np.asarray(img, dtype=np.float32) / 255.0 - IMAGENET_MEAN) / IMAGENET_STD
        samples.append(arr.transpose(2, 0, 1).astype(np.float32))
        labels.append({"lines": placed})
        previews.append(img)
    return np.stack(samples), labels, previews


def render(kind, count, seed, size=None, avoid=()):
    if kind == "det":
        return render_pages(count, seed, size or (320, 320), avoid)
    if kind in ("rec", "cls"):
        return render_lines(kind, count, seed, avoid)
    raise ValueError("kind must be rec, cls or det, got " + kind)


def label_texts(labels):
    """Every text a label list holds (to keep another set disjoint from it)."""
    out = []
    for label in labels:
        out += [line["text"] for line in label["lines"]] if "lines" in label else [label["text"]]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["rec", "cls", "det"])
    parser.add_argument("out")
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--size", default="320x320", help="det page HxW (multiples of 32)")
    parser.add_argument("--previews", type=int, default=8, help="PNGs to write")
    parser.add_argument("--avoid", help="a <kind>_labels.json of another set: leave out every text it holds "
                                        "(a held-out set disjoint from the calibration set)")
    args = parser.parse_args()
    h, w = (int(v) for v in args.size.lower().split("x"))
    avoid = ()
    if args.avoid:
        with open(args.avoid, encoding="utf-8") as f:
            avoid = label_texts(json.load(f))
    data, labels, previews = render(args.kind, args.count, args.seed, (h, w), avoid=avoid)
    os.makedirs(args.out, exist_ok=True)
    np.save(os.path.join(args.out, args.kind + ".npy"), data)
    with open(os.path.join(args.out, args.kind + "_labels.json"), "w", encoding="utf-8") as f:
        json.dump(labels, f, ensure_ascii=False, indent=1)
    for i, img in enumerate(previews[:args.previews]):
        img.save(os.path.join(args.out, "%s_%03d.png" % (args.kind, i)))
    print("%s: %s %s" % (args.kind, data.shape, data.dtype))


if __name__ == "__main__":
    main()
