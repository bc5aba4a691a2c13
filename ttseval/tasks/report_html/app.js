/* ttseval's run report: leaderboard, full report, and the item browser (index.html); two runs side by side
   (compare.html). Plain JavaScript, no build step, no network: the data comes from data.js files. */
(function () {
  'use strict';
  var PAGE = 40; // rows added at a time: a 1,645-item run renders 40 rows, more as the list scrolls

  function el(tag, attrs) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === 'text') node.textContent = attrs[k];
      else if (k === 'html') node.innerHTML = attrs[k];
      else if (attrs[k] !== null && attrs[k] !== undefined && attrs[k] !== false) node.setAttribute(k, attrs[k]);
    });
    for (var i = 2; i < arguments.length; i++) {
      var c = arguments[i];
      if (c === null || c === undefined) continue;
      node.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    }
    return node;
  }
  function pct(v) { return v === null || v === undefined ? '–' : (100 * v).toFixed(1); }
  function num(v, d) { return v === null || v === undefined ? '–' : Number(v).toFixed(d === undefined ? 2 : d); }
  function uniq(values) { return Array.from(new Set(values.filter(function (v) { return v !== null && v !== undefined; }))).sort(); }

  function select(form, name, label, options, value) {
    var s = el('select', {name: name, id: 'f-' + name});
    options.forEach(function (o) {
      var opt = el('option', {value: o[0], text: o[1]});
      if (String(o[0]) === String(value)) opt.selected = true;
      s.appendChild(opt);
    });
    form.appendChild(el('label', {'for': 'f-' + name}, label + ' ', s));
    return s;
  }

  /* Lazily rendered rows: `rows` are already filtered and sorted; `draw(row)` makes a <tr>. */
  function LazyTable(tbody, sentinel, draw) {
    var rows = [], shown = 0;
    var observer = 'IntersectionObserver' in window ? new IntersectionObserver(function (entries) {
      if (entries.some(function (e) { return e.isIntersecting; })) more();
    }, {rootMargin: '600px'}) : null;
    if (observer) observer.observe(sentinel);
    function more() {
      var frag = document.createDocumentFragment();
      var end = Math.min(rows.length, shown + PAGE);
      for (; shown < end; shown++) frag.appendChild(draw(rows[shown]));
      tbody.appendChild(frag);
    }
    return {
      set: function (next) { rows = next; shown = 0; tbody.textContent = ''; more(); if (!observer) while (shown < rows.length) more(); },
      more: more
    };
  }

  function words(tokens) {
    var p = el('p', {'class': 'transcript'});
    (tokens || []).forEach(function (t) {
      var op = t[0], ref = t[1], hyp = t[2];
      if (op === '=') p.appendChild(document.createTextNode(hyp + ' '));
      else {
        if (op === 's' || op === 'd') p.appendChild(el('del', {title: op === 's' ? 'substituted' : 'deleted', text: ref}));
        if (op === 's' || op === 'i') p.appendChild(el('ins', {title: op === 's' ? 'said instead' : 'inserted', text: hyp}));
        p.appendChild(document.createTextNode(' '));
      }
    });
    return p;
  }

  function verdictCell(judge, v) {
    var box = el('div', {'class': 'verdict'});
    if (!v) return box;
    var label = v.verdict ? v.verdict : (v.status === 'ok' ? 'unparsed' : v.status);
    var order = v.a === 'candidate' ? 'A = this system, B = baseline' : 'A = baseline, B = this system';
    var d = el('details', {}, el('summary', {}, el('span', {'class': 'badge v-' + label, text: label}), ' ' + judge.spec + ' (' + order + ')'));
    if (v.score_candidate !== null && v.score_candidate !== undefined) d.appendChild(el('p', {text: 'scores: this ' + num(v.score_candidate) + ', baseline ' + num(v.score_baseline)}));
    if (v.candidate) d.appendChild(el('p', {text: 'this system: ' + v.candidate}));
    if (v.baseline_notes) d.appendChild(el('p', {text: 'baseline: ' + v.baseline_notes}));
    if (v.comparison) d.appendChild(el('p', {text: 'comparison: ' + v.comparison}));
    if (v.error) d.appendChild(el('p', {text: 'error: ' + v.error}));
    box.appendChild(d);
    return box;
  }

  function clipCell(run, clip, asr, judges, label) {
    var td = el('td', {'class': 'clip'});
    if (!clip) { td.appendChild(el('span', {'class': 'badge s-missing', text: 'no row'})); return td; }
    if (clip.status !== 'ok') td.appendChild(el('span', {'class': 'badge s-' + clip.status, title: clip.error || '', text: clip.status}));
    (clip.flags ? clip.flags.split(',') : []).forEach(function (f) { td.appendChild(el('span', {'class': 'badge s-failed', title: 'failed the audio check ' + f, text: f})); });
    if (clip.audio) td.appendChild(el('audio', {controls: '', preload: 'none', src: clip.audio, 'aria-label': label}));
    var t = clip.asr[asr];
    var line = [];
    if (t) line.push('WER ' + pct(t.wer) + '%', 'CER ' + pct(t.cer) + '%');
    if (clip.mos !== undefined) line.push('MOS ' + num(clip.mos));
    if (clip.duration_s) line.push(num(clip.duration_s, 1) + ' s');
    td.appendChild(el('p', {'class': 'metrics', text: line.join(' · ')}));
    if (t && t.words) td.appendChild(words(t.words));
    else if (t && t.error) td.appendChild(el('p', {'class': 'error', text: t.error}));
    judges.forEach(function (j) { if (clip.judges[j.id]) td.appendChild(verdictCell(j, clip.judges[j.id])); });
    return td;
  }

  function metricOf(clip, key, asr, judge) {
    if (!clip) return null;
    if (key === 'wer' || key === 'cer') return clip.asr[asr] ? clip.asr[asr][key] : null;
    if (key === 'mos') return clip.mos === undefined ? null : clip.mos;
    if (key === 'duration') return clip.duration_s;
    if (key === 'margin') return clip.judges[judge] ? clip.judges[judge].margin : null;
    return null;
  }

  function sortRows(rows, value, desc) {
    rows.sort(function (x, y) {
      var a = value(x), b = value(y);
      if (a === null || a === undefined) return (b === null || b === undefined) ? 0 : 1; // missing last
      if (b === null || b === undefined) return -1;
      return desc ? (b > a ? 1 : b < a ? -1 : 0) : (a > b ? 1 : a < b ? -1 : 0);
    });
    return rows;
  }

  // a win-rate with its 95% CI, 'n too small' where the run had too few items for one
  function winRate(r, judge) {
    if (r.win_rates[judge] === undefined) return 'baseline';
    var ci = (r.win_rate_cis || {})[judge] || [null, null];
    if (r.win_rates[judge] === null) return pct(null);
    return pct(r.win_rates[judge]) + (ci[0] === null || ci[1] === null ? ' (n too small)' : ' [' + pct(ci[0]) + ', ' + pct(ci[1]) + ']');
  }

  // a system's Bradley-Terry rank and Elo with its 95% CI under one judge ('–' when that judge ranked none)
  function btCell(r, judge) {
    var b = (r.bradley_terry || {})[judge];
    if (!b) return '–';
    return '#' + b.rank + ', ' + num(b.elo, 0) + (b.low === null || b.high === null ? ' (n too small)' : ' [' + num(b.low, 0) + ', ' + num(b.high, 0) + ']');
  }

  function runPage(run) {
    document.title = 'ttseval: ' + run.run_id;
    document.getElementById('title').textContent = 'ttseval report: run ' + run.run_id;
    document.getElementById('meta').textContent = Object.keys(run.meta).filter(function (k) { return ['dataset', 'baseline', 'date', 'judges'].indexOf(k) >= 0; })
      .map(function (k) { return k + ': ' + run.meta[k]; }).join(' · ');
    document.getElementById('compare-link').setAttribute('href', 'compare.html?b=' + encodeURIComponent(run.run_id));
    // leaderboard
    var lb = document.getElementById('leaderboard');
    var head = ['system', 'role', 'recogniser', 'completion %', 'WER % [95% CI]', 'CER %', 'MOS'].concat(run.judges.map(function (j) { return 'win-rate % [95% CI] (' + j.spec + ')'; }))
      .concat(run.judges.map(function (j) { return 'Bradley-Terry rank, Elo [95% CI] (' + j.spec + ')'; }));
    lb.tHead.appendChild(el('tr', {}, ...head.map(function (h) { return el('th', {scope: 'col', text: h}); })));
    run.leaderboard.forEach(function (r) {
      var cells = [el('th', {scope: 'row', text: r.system_spec}), el('td', {text: r.role}), el('td', {text: r.asr_spec || '–'}),
        el('td', {text: pct(r.completion_rate) + ' (' + r.n_ok + '/' + r.n_items + ')'}),
        el('td', {text: pct(r.wer) + (r.wer === null ? '' : r.wer_ci_low === null || r.wer_ci_high === null ? ' (n too small)' : ' [' + pct(r.wer_ci_low) + ', ' + pct(r.wer_ci_high) + ']')}),
        el('td', {text: pct(r.cer)}), el('td', {text: num(r.mos)})];
      run.judges.forEach(function (j) { cells.push(el('td', {text: winRate(r, j.id)})); });
      run.judges.forEach(function (j) { cells.push(el('td', {text: btCell(r, j.id)})); });
      lb.tBodies[0].appendChild(el('tr', {}, ...cells));
    });
    var figs = document.getElementById('figures');
    run.figures.forEach(function (f) { figs.appendChild(el('img', {src: f, alt: 'figure: ' + f.split('/').pop().replace('.png', ''), loading: 'lazy'})); });
    document.getElementById('report').innerHTML = run.report_html;

    // item browser
    var form = document.getElementById('filters');
    var items = run.items;
    var systems = run.systems;
    var s = {};
    s.category = select(form, 'category', 'category', [['', 'all']].concat(uniq(items.map(function (i) { return i.category; })).map(function (v) { return [v, v]; })));
    s.depth = select(form, 'depth', 'depth', [['', 'all']].concat(uniq(items.map(function (i) { return i.depth; })).map(function (v) { return [v, String(v)]; })));
    s.language = select(form, 'language', 'language', [['', 'all']].concat(uniq(items.map(function (i) { return i.language; })).map(function (v) { return [v, v]; })));
    s.system = select(form, 'system', 'system', [['', 'all']].concat(systems.map(function (x) { return [x.id, x.spec]; })));
    s.status = select(form, 'status', 'status', [['', 'any'], ['ok', 'ok'], ['failed', 'failed'], ['empty', 'empty'], ['unsupported', 'unsupported'], ['flagged', 'failed an audio check']]);
    s.judge = select(form, 'judge', 'judge', run.judges.map(function (j) { return [j.id, j.spec]; }).concat(run.judges.length ? [] : [['', 'none']]));
    s.verdict = select(form, 'verdict', 'verdict', [['', 'any'], ['win', 'win'], ['loss', 'loss'], ['tie', 'tie']]);
    s.asr = select(form, 'asr', 'recogniser', run.recognisers.map(function (a) { return [a.id, a.spec]; }).concat(run.recognisers.length ? [] : [['', 'none']]));
    s.sort = select(form, 'sort', 'sort by', [['item', 'item'], ['wer', 'WER'], ['cer', 'CER'], ['mos', 'MOS'], ['margin', 'judge margin (how badly lost)'], ['duration', 'duration']]);
    s.order = select(form, 'order', 'order', [['desc', 'highest first'], ['asc', 'lowest first']]);
    var search = el('input', {type: 'search', id: 'f-text', name: 'text', placeholder: 'text or id'});
    form.appendChild(el('label', {'for': 'f-text'}, 'find ', search));

    var table = document.getElementById('items');
    function header() {
      var shown = s.system.value ? systems.filter(function (x) { return x.id === s.system.value; }) : systems;
      table.tHead.textContent = '';
      table.tHead.appendChild(el('tr', {}, el('th', {scope: 'col', text: 'item'}), ...shown.map(function (x) { return el('th', {scope: 'col', text: x.spec + (x.role !== 'tts' ? ' (' + x.role + ')' : '')}); })));
      return shown;
    }
    var shownSystems = header();
    var lazy = LazyTable(table.tBodies[0], document.getElementById('more'), function (item) {
      var judges = run.judges.filter(function (j) { return !s.judge.value || j.id === s.judge.value; });
      var tr = el('tr', {'data-item': item.id}, el('th', {scope: 'row'}, el('code', {text: item.id}),
        el('p', {'class': 'tags', text: [item.category, 'depth ' + item.depth, item.language].filter(Boolean).join(' · ')}),
        el('p', {'class': 'text', text: item.text})));
      shownSystems.forEach(function (x) { tr.appendChild(clipCell(run, item.clips[x.id], s.asr.value, judges, x.spec + ', ' + item.id)); });
      return tr;
    });
    function apply() {
      shownSystems = header();
      var focus = s.system.value, text = search.value.trim().toLowerCase();
      var rows = items.filter(function (i) {
        if (s.category.value && i.category !== s.category.value) return false;
        if (s.depth.value !== '' && String(i.depth) !== s.depth.value) return false;
        if (s.language.value && i.language !== s.language.value) return false;
        if (text && i.text.toLowerCase().indexOf(text) < 0 && i.id.toLowerCase().indexOf(text) < 0) return false;
        var clips = focus ? [i.clips[focus]] : shownSystems.map(function (x) { return i.clips[x.id]; });
        if (s.status.value && !clips.some(function (c) { return c && (s.status.value === 'flagged' ? !!c.flags : c.status === s.status.value); })) return false;
        if (s.verdict.value && !clips.some(function (c) { return c && c.judges[s.judge.value] && c.judges[s.judge.value].verdict === s.verdict.value; })) return false;
        return true;
      });
      if (s.sort.value !== 'item') {
        var key = s.sort.value;
        sortRows(rows, function (i) {
          var values = (focus ? [i.clips[focus]] : shownSystems.map(function (x) { return i.clips[x.id]; }))
            .map(function (c) { return metricOf(c, key, s.asr.value, s.judge.value); }).filter(function (v) { return v !== null && v !== undefined; });
          if (!values.length) return null;
          return s.order.value === 'desc' ? Math.max.apply(null, values) : Math.min.apply(null, values);
        }, s.order.value === 'desc');
      }
      document.getElementById('count').textContent = rows.length + ' of ' + items.length + ' items';
      lazy.set(rows);
    }
    form.addEventListener('change', apply);
    search.addEventListener('input', apply);
    form.addEventListener('submit', function (e) { e.preventDefault(); });
    apply();
  }

  function comparePage() {
    var params = new URLSearchParams(location.search);
    var a = params.get('a'), b = params.get('b');
    var form = document.getElementById('runs');
    form.a.value = a || ''; form.b.value = b || '';
    if (!a || !b) { document.getElementById('meta').textContent = 'Give two run ids of this store.'; return; }
    var pending = 2;
    [a, b].forEach(function (id) {
      var tag = el('script', {src: '../../' + encodeURIComponent(id) + '/html/data.js'});
      tag.onload = function () { if (--pending === 0) draw(); };
      tag.onerror = function () { document.getElementById('meta').textContent = 'run ' + id + ' has no HTML report in this store'; };
      document.body.appendChild(tag);
    });
    function draw() {
      var A = window.TTSEVAL_RUNS[a], B = window.TTSEVAL_RUNS[b];
      document.getElementById('title').textContent = 'Run ' + a + ' and run ' + b + ' side by side';
      var systems = B.systems.filter(function (x) { return A.systems.some(function (y) { return y.id === x.id; }); });
      var asrs = B.recognisers.filter(function (r) { return A.recognisers.some(function (q) { return q.id === r.id; }); });
      var byId = {}; A.items.forEach(function (i) { byId[i.id] = i; });
      var pairs = [];
      B.items.forEach(function (i) { if (byId[i.id]) systems.forEach(function (x) { pairs.push({item: i, before: byId[i.id].clips[x.id], after: i.clips[x.id], system: x}); }); });
      document.getElementById('meta').textContent = pairs.length + ' clips of ' + systems.length + ' systems in both runs';
      var f = document.getElementById('filters');
      var sys = select(f, 'system', 'system', [['', 'all']].concat(systems.map(function (x) { return [x.id, x.spec]; })));
      var asr = select(f, 'asr', 'recogniser', asrs.map(function (r) { return [r.id, r.spec]; }));
      var sort = select(f, 'sort', 'sort by', [['wer', 'WER change'], ['mos', 'MOS change'], ['item', 'item']]);
      function delta(p, key) {
        var x = metricOf(p.before, key, asr.value), y = metricOf(p.after, key, asr.value);
        return x === null || y === null || x === undefined || y === undefined ? null : y - x;
      }
      var table = document.getElementById('items');
      table.tHead.appendChild(el('tr', {}, ...['item', 'system', 'run ' + a, 'run ' + b, 'change'].map(function (h) { return el('th', {scope: 'col', text: h}); })));
      var lazy = LazyTable(table.tBodies[0], document.getElementById('more'), function (p) {
        var dw = delta(p, 'wer'), dm = delta(p, 'mos');
        return el('tr', {'data-item': p.item.id, 'data-system': p.system.id},
          el('th', {scope: 'row'}, el('code', {text: p.item.id}), el('p', {'class': 'text', text: p.item.text})),
          el('td', {text: p.system.spec}),
          clipCell(A, p.before, asr.value, [], p.system.spec + ', run ' + a),
          clipCell(B, p.after, asr.value, [], p.system.spec + ', run ' + b),
          el('td', {'class': 'delta', text: 'WER ' + (dw === null ? '–' : (dw > 0 ? '+' : '') + pct(dw)) + ' pp · MOS ' + (dm === null ? '–' : (dm > 0 ? '+' : '') + num(dm))}));
      });
      function apply() {
        var rows = pairs.filter(function (p) { return !sys.value || p.system.id === sys.value; });
        if (sort.value !== 'item') sortRows(rows, function (p) { var d = delta(p, sort.value); return d === null ? null : Math.abs(d); }, true);
        document.getElementById('count').textContent = rows.length + ' clips';
        lazy.set(rows);
      }
      f.addEventListener('change', apply);
      apply();
    }
  }

  document.addEventListener('DOMContentLoaded', function () {
    if (document.body.dataset.page === 'compare') return comparePage();
    var runs = window.TTSEVAL_RUNS || {};
    var ids = Object.keys(runs);
    if (!ids.length) { document.getElementById('title').textContent = 'data.js is missing beside this page'; return; }
    runPage(runs[ids[0]]);
  });
})();
