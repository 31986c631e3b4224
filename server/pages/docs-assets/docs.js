/* global SwaggerUIBundle */
// Served as a static file, not inline, so the page's Content-Security-Policy can
// forbid inline scripts. Everything shown here is read from the spec at run
// time, so the page never drifts from openapi.yaml.
(function () {
  'use strict';

  var STABILITY_LEVELS = ['beta', 'experimental'];

  // Swagger UI resolves an operation only once it is expanded; the markers must
  // show on collapsed rows too, so they are read from the spec as loaded.
  function rawOperation(system, path, method) {
    return system.specSelectors.specJson().getIn(['paths', path, method]);
  }

  function tagParents(specSelectors) {
    var parentOf = new Map();
    specSelectors.tags().forEach(function (tag) {
      var parent = tag.get('x-parent');
      if (typeof parent === 'string') parentOf.set(tag.get('name'), parent);
    });
    return parentOf;
  }

  // Splits the tag list into runs: a group (a parent tag and the tags that name
  // it in x-parent, wherever they are declared) or a run of ungrouped tags, in
  // the order the spec declares them.
  function segmentTags(taggedOps, parentOf) {
    var parents = new Set(parentOf.values());
    var segments = [];
    var groups = new Map();
    taggedOps.keySeq().forEach(function (tag) {
      var group = parentOf.get(tag) || (parents.has(tag) ? tag : null);
      if (group) {
        var segment = groups.get(group);
        if (!segment) {
          segment = { group: group, tags: new Set() };
          groups.set(group, segment);
          segments.push(segment);
        }
        // A parent tag is only a heading; it joins the list if it ever gets operations.
        if (group !== tag || taggedOps.getIn([tag, 'operations']).size > 0) segment.tags.add(tag);
      } else {
        var last = segments[segments.length - 1];
        if (!last || last.group) {
          last = { group: null, tags: new Set() };
          segments.push(last);
        }
        last.tags.add(tag);
      }
    });
    return segments;
  }

  function GroupedOperations(Original, system) {
    var h = system.React.createElement;
    return function (props) {
      var specSelectors = props.specSelectors;
      var parentOf = tagParents(specSelectors);
      if (parentOf.size === 0) return h(Original, props);

      var taggedOps = specSelectors.taggedOperations();
      var Markdown = props.getComponent('Markdown', true);

      // The stock list renderer is reused for each run by handing it a
      // selector that answers with that run's tags only.
      function list(tags, key) {
        var subset = taggedOps.filter(function (_tagObj, tag) {
          return tags.has(tag);
        });
        if (subset.size === 0) return null;
        var selectors = Object.assign({}, specSelectors, {
          taggedOperations: function () {
            return subset;
          },
        });
        return h(Original, Object.assign({}, props, { key: key, specSelectors: selectors }));
      }

      return h(
        'div',
        { className: 'tag-groups' },
        segmentTags(taggedOps, parentOf).map(function (segment, i) {
          if (!segment.group) return list(segment.tags, 'ungrouped-' + i);
          var id = 'tag-group-' + segment.group.replace(/[^A-Za-z0-9_-]/g, '_');
          var description = specSelectors
            .tags()
            .find(
              function (tag) {
                return tag.get('name') === segment.group;
              },
              null,
              system.Im.Map(),
            )
            .get('description');
          return h(
            'section',
            {
              key: id,
              className: 'tag-group',
              'data-tag-group': segment.group,
              'aria-labelledby': id,
            },
            h('h2', { className: 'tag-group__title', id: id }, segment.group),
            description ? h('div', { className: 'tag-group__description' }, h(Markdown, { source: description })) : null,
            h('div', { className: 'tag-group__children' }, list(segment.tags, id + '-tags')),
          );
        }),
      );
    };
  }

  function OperationMarkers(Original, system) {
    var h = system.React.createElement;
    return function (props) {
      var operationProps = props.operationProps;
      var op = rawOperation(system, operationProps.get('path'), operationProps.get('method'));
      var markers = [];
      var stability = op && op.get('x-stability');
      if (STABILITY_LEVELS.indexOf(stability) !== -1) {
        markers.push(
          h(
            'span',
            {
              key: 'stability',
              className: 'stability-badge stability-badge--' + stability,
              'data-stability': stability,
              title: 'x-stability: ' + stability + ' - this operation may change',
            },
            stability,
          ),
        );
      }
      if (op && op.get('deprecated') === true) {
        var sunset = op.get('x-deprecated-sunset');
        markers.push(
          h(
            'span',
            { key: 'deprecated', className: 'deprecation-notice', 'data-sunset': sunset || '' },
            sunset ? 'Deprecated - sunset ' + sunset : 'Deprecated',
          ),
        );
      }
      return h(system.React.Fragment, null, h(Original, props), markers);
    };
  }

  // info.description holds the rules that cut across operations (authentication, errors,
  // the order of checks, limits...): a long read that would push every operation a few
  // screens down. The operations come first; the rules sit in a closed <details> under the
  // title, one click away, its summary naming the description's own `## ` sections.
  function RulesOneClickAway(Original, system) {
    var h = system.React.createElement;
    return function (props) {
      var info = props.info;
      var description = info && info.get('description');
      if (typeof description !== 'string' || description.trim() === '') return h(Original, props);
      var Markdown = props.getComponent('Markdown', true);
      var sections = (description.match(/^## +(.+)$/gm) || []).map(function (line) {
        return line.replace(/^## +/, '').trim();
      });
      return h(
        system.React.Fragment,
        null,
        h(Original, Object.assign({}, props, { info: info.delete('description') })),
        h(
          'details',
          { className: 'api-rules', id: 'api-rules' },
          h(
            'summary',
            { className: 'api-rules__summary' },
            'Rules for every operation' + (sections.length > 0 ? ': ' + sections.join(', ') : ''),
          ),
          h('div', { className: 'api-rules__body' }, h(Markdown, { source: description })),
        ),
      );
    };
  }

  function PetstoreDocsPlugin() {
    return {
      statePlugins: {
        spec: {
          wrapSelectors: {
            // Swagger UI's own hook for hiding the try-it panel: false removes the
            // button and the execute controls, not just hides them.
            allowTryItOutFor: function (original, system) {
              return function (_state, path, method) {
                var op = rawOperation(system, path, method);
                if (op && op.get('x-hideTryItPanel') === true) return false;
                return original(path, method);
              };
            },
          },
        },
      },
      wrapComponents: {
        info: RulesOneClickAway,
        operations: GroupedOperations,
        OperationSummaryPath: OperationMarkers,
      },
    };
  }

  var root = document.getElementById('swagger-ui');
  window.ui = SwaggerUIBundle({
    url: root.getAttribute('data-spec-url'),
    domNode: root,
    presets: [SwaggerUIBundle.presets.apis],
    plugins: [PetstoreDocsPlugin],
    layout: 'BaseLayout',
    // The default points at a public validator service; there is none offline.
    validatorUrl: null,
    showExtensions: true,
    displayOperationId: true,
  });
})();
