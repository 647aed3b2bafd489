(function(){
'use strict';
// The address-space pictures (reporters/address_space.py): drag across one to zoom into a time range,
// double-click or the button to see all of it. Time is drawn with its idle stretches cut short; the
// figure's data-axis says where (breaks: drawn start, real start, real length, in ns), so that the ticks
// on a zoomed axis say real times as the server's do (reporters/address_space.py ticks, tick_label).
function stretches(d){var out=[],start=0,real=0;d.breaks.forEach(function(b){out.push([start,b[0],real]);
 start=b[0]+d.cap;real=b[1]+b[2];});out.push([start,d.total,real]);return out;}
function label(real,step){var units=[['s',9],['ms',6],['us',3],['ns',0]];
 for(var i=0;i<units.length;i++){var p=units[i][1],size=Math.pow(10,p);
  if(real>=size||step*10>=size||p===0){var dec=Math.max(0,p-(String(step).length-1));
   return (real/size).toFixed(dec)+' '+units[i][0];}}return real+' ns';}
function ticks(d,low,high){var span=Math.max(high-low,1),target=d.target,step=1,found=[];
 for(var k=0;k<19;k++){var done=false;[1,2,5].forEach(function(m){if(!done&&m*Math.pow(10,k)*target>=span){step=m*Math.pow(10,k);done=true;}});
  if(done)break;}
 stretches(d).forEach(function(s){var a=Math.max(s[0],low),b=Math.min(s[1],high);if(a>b)return;
  for(var real=Math.ceil((s[2]+(a-s[0]))/step)*step;real<=s[2]+(b-s[0]);real+=step){var drawn=s[0]+(real-s[2]);
   if(!found.length||drawn-found[found.length-1][0]>=span/(target*1.6))found.push([drawn,label(real,step)]);}});
 return found;}
var figures=[];
Array.prototype.forEach.call(document.querySelectorAll('figure.address-space'),function(fig){
 var d=JSON.parse(fig.getAttribute('data-axis')),svg=fig.querySelector('svg'),L=d.left,W=d.width;
 var reset=fig.querySelector('.reset'),sel=svg.querySelector('.selection'),xticks=svg.querySelector('.xticks');
 var NS=svg.namespaceURI,view={a:L,b:L+W},drag=null;
 function num(el,name){return Number(el.getAttribute(name));}
 // every shape of the plot at the whole view: where it starts and how long it is
 var boxes=Array.prototype.map.call(svg.querySelectorAll('g.chunks rect, rect.idle'),function(el){
  return {el:el,x:num(el,'x'),w:el.hasAttribute('data-w')?num(el,'data-w'):num(el,'width')};});
 var lines=Array.prototype.map.call(svg.querySelectorAll('g.chunks line'),function(el){return {el:el,x:num(el,'x1')};});
 var marks=Array.prototype.map.call(svg.querySelectorAll('g.step-mark'),function(el){return {el:el,x:num(el,'data-x')};});
 var labels=Array.prototype.map.call(svg.querySelectorAll('text.peak-note, text.failure-note'),function(el){
  var line=svg.querySelector(el.getAttribute('class')==='peak-note'?'line.peak':'line.failure');
  return {el:el,x:num(line,'x1'),text:el.textContent};});
 var right=svg.viewBox.baseVal.width;
 function X(x){return L+(x-view.a)*W/(view.b-view.a);}
 function place(l,x){var room=l.text.length*6,anchor,at;
  if(x+room<=right-4){anchor='start';at=x+3;}else if(x-room>=4){anchor='end';at=x-3;}
  else{anchor='middle';at=Math.min(Math.max(x,room/2+4),right-room/2-4);}
  l.el.setAttribute('x',at.toFixed(2));l.el.setAttribute('text-anchor',anchor);
  l.el.setAttribute('visibility',x>=L-0.01&&x<=L+W+0.01?'visible':'hidden');}
 function draw(a,b){view.a=a;view.b=b;var k=W/(b-a);
  boxes.forEach(function(s){s.el.setAttribute('x',X(s.x).toFixed(3));s.el.setAttribute('width',Math.max(s.w*k,0.6).toFixed(3));});
  lines.forEach(function(s){var x=X(s.x).toFixed(3);s.el.setAttribute('x1',x);s.el.setAttribute('x2',x);});
  marks.forEach(function(s){var x=X(s.x),l=s.el.querySelector('line'),t=s.el.querySelector('text');
   l.setAttribute('x1',x.toFixed(3));l.setAttribute('x2',x.toFixed(3));t.setAttribute('x',(x+3).toFixed(3));
   s.el.setAttribute('visibility',x>=L&&x<=L+W?'visible':'hidden');});
  labels.forEach(function(l){place(l,X(l.x));});
  while(xticks.firstChild)xticks.removeChild(xticks.firstChild);
  var low=(a-L)/W*d.total,high=(b-L)/W*d.total;
  ticks(d,low,high).forEach(function(t){var x=L+(t[0]-low)/(high-low)*W;
   var l=document.createElementNS(NS,'line');[['x1',x],['x2',x],['y1',num(sel,'y')+num(sel,'height')+6],
    ['y2',num(sel,'y')+num(sel,'height')+10],['stroke','#6b7280']].forEach(function(p){l.setAttribute(p[0],typeof p[1]==='number'?p[1].toFixed(3):p[1]);});
   var s=document.createElementNS(NS,'text');s.setAttribute('x',x.toFixed(3));s.setAttribute('y',num(sel,'y')+num(sel,'height')+22);
   s.setAttribute('text-anchor','middle');s.setAttribute('font-size','10');s.textContent=t[1];
   xticks.appendChild(l);xticks.appendChild(s);});
  reset.hidden=(a===L&&b===L+W);fig.setAttribute('data-view',a+','+b);}
 function localX(e){var p=svg.createSVGPoint();p.x=e.clientX;p.y=e.clientY;
  var x=p.matrixTransform(svg.getScreenCTM().inverse()).x;return Math.min(L+W,Math.max(L,x));}
 function toView(x){return view.a+(x-L)*(view.b-view.a)/W;}
 svg.addEventListener('mousedown',function(e){drag={x:localX(e)};e.preventDefault();});
 svg.addEventListener('mousemove',function(e){if(!drag)return;var x=localX(e);
  sel.setAttribute('x',Math.min(x,drag.x).toFixed(1));sel.setAttribute('width',Math.abs(x-drag.x).toFixed(1));
  sel.setAttribute('visibility','visible');});
 svg.addEventListener('mouseup',function(e){var x=localX(e),g=drag;drag=null;sel.setAttribute('visibility','hidden');
  if(g&&Math.abs(x-g.x)>4){var a=toView(Math.min(x,g.x)),b=toView(Math.max(x,g.x));if(b-a>1e-6)draw(a,b);}});
 svg.addEventListener('mouseleave',function(){drag=null;sel.setAttribute('visibility','hidden');});
 svg.addEventListener('dblclick',function(){draw(L,L+W);});
 reset.addEventListener('click',function(){draw(L,L+W);});
 figures.push({fig:fig,draw:draw,boxes:boxes,L:L,W:W,d:d});
 fig.setAttribute('data-view',L+','+(L+W));
 if(d.focus)draw(d.focus[0],d.focus[1]);  // where the bytes move (reporters/address_space.py focus)
});
document.documentElement.setAttribute('data-address-spaces',String(figures.length));
if(location.hash==='#selftest'){
 // Zoom each picture into its second quarter and say where its first chunk went and what the axis says.
 figures.forEach(function(f){var a=f.L+f.W/4,b=f.L+f.W/2;f.draw(a,b);
  var first=f.boxes.length?f.boxes[0]:null,ticks=f.fig.querySelectorAll('.xticks text');
  f.fig.setAttribute('data-selftest',JSON.stringify({view:[a,b],first:first?[first.x,first.w,Number(first.el.getAttribute('x')),
   Number(first.el.getAttribute('width'))]:null,ticks:Array.prototype.map.call(ticks,function(t){return [Number(t.getAttribute('x')),t.textContent];})}));});
}
})();
