#version 450
// The line layer: one instance per segment (image pixel coordinates), expanded here to a
// screen-space quad padded by half the width plus half a pixel for the anti-aliased edge and
// the round caps: line.frag's coverage is 0 from that distance on, so the quad holds every
// pixel centre it draws and no more (fragments are most of a software rasterizer's cost).
// The fragment shader computes coverage from the distance to the segment.
layout(location = 0) in vec4 segment;   // x1, y1, x2, y2 (image pixels)
layout(location = 1) in vec4 rgba;
layout(location = 2) in float widthPx;

layout(push_constant) uniform ViewPc {
    vec2 center;     // image point at the viewport centre
    vec2 viewport;   // framebuffer size in pixels
    float zoom;      // screen pixels per image pixel
} view;

layout(location = 0) flat out vec4 ends;      // segment ends in framebuffer pixels
layout(location = 1) flat out vec4 color;
layout(location = 2) flat out float halfWidth;

void main() {
    vec2 a = (segment.xy - view.center) * view.zoom + 0.5 * view.viewport;
    vec2 b = (segment.zw - view.center) * view.zoom + 0.5 * view.viewport;
    // Lines thinner than a pixel are drawn one pixel wide and fainter.
    float w = max(widthPx, 1.0);
    float fade = clamp(widthPx, 0.0, 1.0);
    float pad = 0.5 * w + 0.5;

    vec2 d = b - a;
    float len = length(d);
    vec2 dir = len > 1e-4 ? d / len : vec2(1.0, 0.0);
    vec2 normal = vec2(-dir.y, dir.x);
    vec2 p = ((gl_VertexIndex & 1) == 0 ? a - dir * pad : b + dir * pad) +
             normal * ((gl_VertexIndex >> 1) == 0 ? -pad : pad);

    ends = vec4(a, b);
    color = vec4(rgba.rgb, rgba.a * fade);
    halfWidth = 0.5 * w;
    gl_Position = vec4(p / view.viewport * 2.0 - 1.0, 0.0, 1.0);
}
