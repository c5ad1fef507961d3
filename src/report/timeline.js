// The report page's own script: draws the interactive timeline on a canvas (wheel to zoom,
// drag to move, hover for details, double-click for the whole window) and writes a
// self-check into #self-check once everything is drawn.
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('timeline-data').textContent);
  var report = JSON.parse(document.getElementById('report-data').textContent);
  var canvas = document.getElementById('timeline-canvas');
  var tooltip = document.getElementById('timeline-tooltip');
  var context = canvas.getContext('2d');
  var ROW = 16, GUTTER = 230, AXIS = 22;
  // The pictures' colours: operations by their place in data.operations, kernels green.
  var COLOURS = ['#1f77b4', '#ff7f0e', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#bcbd22', '#17becf'];
  var view = { from: 0, to: data.length_ns };
  var drawn = 0;

  function colourOf(track, name) {
    if (track.kind !== 'ops') { return '#2ca02c'; }
    var index = data.operations.indexOf(name);
    return index < 0 ? '#7f7f7f' : COLOURS[index % COLOURS.length];
  }

  function label(track) {
    return track.name;
  }

  function xOf(ns, width) {
    return GUTTER + (ns - view.from) / (view.to - view.from) * (width - GUTTER);
  }

  function draw() {
    var ratio = window.devicePixelRatio || 1;
    var width = canvas.clientWidth;
    var height = AXIS + ROW * data.tracks.length + 4;
    canvas.style.height = height + 'px';
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    context.clearRect(0, 0, width, height);
    context.font = '11px sans-serif';
    context.textBaseline = 'middle';
    // Time axis: about eight ticks, in ms since the trace's start.
    var span = view.to - view.from;
    var step = Math.pow(10, Math.floor(Math.log10(span / 8)));
    if (span / step > 16) { step *= 5; } else if (span / step > 8) { step *= 2; }
    context.fillStyle = '#444';
    context.strokeStyle = '#ddd';
    for (var t = Math.ceil(view.from / step) * step; t <= view.to; t += step) {
      var x = xOf(t, width);
      context.beginPath(); context.moveTo(x, AXIS - 4); context.lineTo(x, height); context.stroke();
      context.fillText(((data.start_ns + t) / 1e6).toFixed(3) + ' ms', x + 2, AXIS / 2);
    }
    drawn = 0;
    data.tracks.forEach(function (track, row) {
      var y = AXIS + row * ROW;
      context.fillStyle = '#222';
      context.fillText(label(track), 4, y + ROW / 2, GUTTER - 8);
      track.intervals.forEach(function (interval) {
        if (interval[1] < view.from || interval[0] > view.to) { return; }
        var x0 = Math.max(GUTTER, xOf(interval[0], width));
        var x1 = Math.min(width, xOf(interval[1], width));
        var inset = 2 + 3 * Math.min(interval[2], 2);
        context.fillStyle = colourOf(track, data.strings[interval[3]]);
        context.fillRect(x0, y + inset, Math.max(1, x1 - x0), ROW - 2 * inset);
        drawn++;
      });
    });
  }

  // The innermost interval under the pointer.
  function hit(event) {
    var box = canvas.getBoundingClientRect();
    var row = Math.floor((event.clientY - box.top - AXIS) / ROW);
    var track = data.tracks[row];
    var x = event.clientX - box.left;
    if (!track || x < GUTTER) { return null; }
    var ns = view.from + (x - GUTTER) / (box.width - GUTTER) * (view.to - view.from);
    var slack = 2 * (view.to - view.from) / (box.width - GUTTER);
    var found = null;
    track.intervals.forEach(function (interval) {
      if (interval[0] - slack <= ns && ns <= interval[1] + slack &&
          (!found || interval[2] >= found[2])) { found = interval; }
    });
    return found && { track: track, interval: found };
  }

  var dragging = null;
  canvas.addEventListener('wheel', function (event) {
    event.preventDefault();
    var box = canvas.getBoundingClientRect();
    var share = Math.min(1, Math.max(0, (event.clientX - box.left - GUTTER) / (box.width - GUTTER)));
    var at = view.from + share * (view.to - view.from);
    var factor = event.deltaY < 0 ? 0.8 : 1.25;
    var span = Math.max(100, (view.to - view.from) * factor);
    view.from = at - share * span;
    view.to = view.from + span;
    draw();
  }, { passive: false });
  canvas.addEventListener('mousedown', function (event) {
    dragging = { x: event.clientX, from: view.from, to: view.to };
  });
  window.addEventListener('mouseup', function () { dragging = null; });
  canvas.addEventListener('mousemove', function (event) {
    var box = canvas.getBoundingClientRect();
    if (dragging) {
      var shift = (event.clientX - dragging.x) / (box.width - GUTTER) * (dragging.to - dragging.from);
      view.from = dragging.from - shift;
      view.to = dragging.to - shift;
      draw();
      return;
    }
    var found = hit(event);
    if (!found) { tooltip.hidden = true; return; }
    var interval = found.interval;
    tooltip.textContent = data.strings[interval[3]] + '\n' +
      (data.strings[interval[4]] ? data.strings[interval[4]] + '\n' : '') +
      found.track.name + ' (' + found.track.process + ')\n' +
      'start ' + ((data.start_ns + interval[0]) / 1e6).toFixed(3) + ' ms, ' +
      ((interval[1] - interval[0]) / 1e3).toFixed(1) + ' µs';
    tooltip.style.left = (event.clientX - box.left + 12) + 'px';
    tooltip.style.top = (event.clientY - box.top + 12) + 'px';
    tooltip.hidden = false;
  });
  canvas.addEventListener('mouseleave', function () { tooltip.hidden = true; });
  canvas.addEventListener('dblclick', function () {
    view = { from: 0, to: data.length_ns };
    draw();
  });
  window.addEventListener('resize', draw);
  draw();

  // The pointer's handlers, tried once as a person would use them: hovering the middle
  // of the first operation, a wheel turn there, a double-click.
  function tryInteraction() {
    var result = { hover: null, zoomed: false, reset: false };
    var row = data.tracks.findIndex(function (t) { return t.kind === 'ops' && t.intervals.length; });
    if (row < 0) { return result; }
    var interval = data.tracks[row].intervals[0];
    var box = canvas.getBoundingClientRect();
    var middle = (Math.max(interval[0], view.from) + Math.min(interval[1], view.to)) / 2;
    var at = {
      clientX: box.left + xOf(middle, box.width),
      clientY: box.top + AXIS + row * ROW + ROW / 2,
      bubbles: true
    };
    canvas.dispatchEvent(new MouseEvent('mousemove', at));
    result.hover = tooltip.hidden ? null : tooltip.textContent;
    canvas.dispatchEvent(new MouseEvent('mouseleave', at));
    var span = view.to - view.from;
    canvas.dispatchEvent(new WheelEvent('wheel', Object.assign({ deltaY: -100, cancelable: true }, at)));
    result.zoomed = view.to - view.from < span;
    canvas.dispatchEvent(new MouseEvent('dblclick', at));
    result.reset = view.from === 0 && view.to === data.length_ns;
    return result;
  }
  var interaction = tryInteraction();

  // The self-check: what was drawn, for the reader and for tests.
  var marks = {};
  report.plots.forEach(function (id) {
    var section = document.querySelector('section[data-plot="' + id + '"]');
    var svg = section && section.querySelector('svg');
    marks[id] = svg ? svg.querySelectorAll('rect, circle, line, polyline, path, polygon').length : 0;
  });
  var hottest = null;
  if (report.heatmap) {
    var best = -1;
    // The row with the largest median skew (a job's first calls carry its start-up).
    report.heatmap.skew_us.forEach(function (row, index) {
      var sorted = row.slice().sort(function (a, b) { return a - b; });
      var median = sorted.length ? sorted[Math.floor(sorted.length / 2)] : 0;
      if (median > best) { best = median; hottest = report.heatmap.ranks[index]; }
    });
  }
  document.getElementById('self-check').textContent = JSON.stringify({
    errors: window.reportErrors,
    plots: marks,
    timeline: { tracks: data.tracks.length, drawn: drawn, interaction: interaction },
    hottest_rank: hottest
  });
})();
