
(function(){
'use strict';
var data=JSON.parse(document.getElementById('memtrace-data').textContent);
var UNITS=['B','KiB','MiB','GiB','TiB','PiB'];
function fmtBytes(v){var sign=v<0?'-':'';var s=Math.abs(v);for(var i=0;i<UNITS.length;i++){
 if(s<1024||i===UNITS.length-1){if(i===0)return sign+Math.round(s)+' B';
 return sign+(s<100?String(Number(s.toPrecision(3))):String(Math.round(s)))+' '+UNITS[i];}s/=1024;}}
function fmtTime(us){var a=Math.abs(us);if(a<1000)return (us===Math.round(us)?us:Number(us.toPrecision(3)))+' us';
 if(a<1e6)return Number((us/1000).toPrecision(3))+' ms';return Number((us/1e6).toPrecision(3))+' s';}
function exact(v){return v.toLocaleString('en-US');}
function nearest(ts,t){var lo=0,hi=ts.length-1;if(hi<0)return -1;while(lo<hi){var mid=(lo+hi)>>1;if(ts[mid]<t)lo=mid+1;else hi=mid;}
 if(lo>0&&Math.abs(ts[lo-1]-t)<=Math.abs(ts[lo]-t))return lo-1;return lo;}
var STEPS=[];for(var k=0;k<10;k++){STEPS.push(Math.pow(10,k),2*Math.pow(10,k),5*Math.pow(10,k));}
function ticks(lo,hi){var step=STEPS[STEPS.length-1];for(var i=0;i<STEPS.length;i++){if(STEPS[i]*5>=hi-lo){step=STEPS[i];break;}}
 if(step*5<hi-lo){var p=Math.pow(10,Math.floor(Math.log((hi-lo)/5)/Math.LN10)),m=[1,2,5,10];for(var j=0;j<4;j++){if(m[j]*p*5>=hi-lo){step=m[j]*p;break;}}}  // beyond the table (years): 1-2-5 steps go on
 var out=[];for(var v=Math.ceil(lo/step)*step;v<=hi;v+=step)out.push(v);return out;}
var charts=[];
Array.prototype.forEach.call(document.querySelectorAll('figure.chart'),function(fig){
 var c=data.charts[Number(fig.getAttribute('data-chart'))],g=c.geometry;
 var svg=fig.querySelector('svg'),tip=fig.querySelector('.tip'),reset=fig.querySelector('.reset');
 var cursor=svg.querySelector('.cursor'),cline=cursor.querySelector('line'),cdot=cursor.querySelector('circle');
 var sel=svg.querySelector('.selection'),xticks=svg.querySelector('.xticks');
 var view={a:c.v0,b:c.v1},pinned=false,drag=null;
 function X(t){return g.left+(t-view.a)/(view.b-view.a)*(g.right-g.left);}
 function Y(v){return g.top+(1-(v-c.y0)/(c.y1-c.y0))*(g.bottom-g.top);}
 function f(v){return v.toFixed(1);}
 function toTime(x){return view.a+(x-g.left)/(g.right-g.left)*(view.b-view.a);}
 function localX(e){var p=svg.createSVGPoint();p.x=e.clientX;p.y=e.clientY;
  var x=p.matrixTransform(svg.getScreenCTM().inverse()).x;return Math.min(g.right,Math.max(g.left,x));}
 function set(el,attrs){for(var k in attrs)el.setAttribute(k,attrs[k]);}
 function draw(a,b){
  view.a=a;view.b=b;
  var level=c.start,i=0,n=c.t.length;
  while(i<n&&c.t[i]<a){level=c.b[i];i++;}
  var d=['M'+f(X(a))+','+f(Y(level))];
  for(;i<n&&c.t[i]<=b;i++)d.push('H'+f(X(c.t[i]))+'V'+f(Y(c.b[i])));
  d.push('H'+f(X(b)));var line=d.join('');
  svg.querySelector('.curve').setAttribute('d',line);
  svg.querySelector('.area').setAttribute('d',line+'V'+f(Y(Math.max(c.y0,0)))+'H'+f(X(a))+'Z');
  Array.prototype.forEach.call(svg.querySelectorAll('.snap'),function(el,k){
   var t=c.snaps.t[k];el.setAttribute('cx',f(X(t)));el.setAttribute('visibility',t>=a&&t<=b?'visible':'hidden');});
  if(c.peak){var px=X(c.peak.t),inside=c.peak.t>=a&&c.peak.t<=b,right=px>(g.left+g.right)/2;
   set(svg.querySelector('.peak-line'),{x1:f(px),x2:f(px)});set(svg.querySelector('.peak-dot'),{cx:f(px)});
   set(svg.querySelector('.peak-label'),{x:f(px+(right?-9:9)),'text-anchor':right?'end':'start',visibility:inside?'visible':'hidden'});}
  while(xticks.firstChild)xticks.removeChild(xticks.firstChild);
  ticks(a,b).forEach(function(t){
   var l=document.createElementNS(svg.namespaceURI,'line');set(l,{'class':'xtick',x1:f(X(t)),x2:f(X(t)),y1:g.bottom,y2:g.bottom+5});
   var s=document.createElementNS(svg.namespaceURI,'text');set(s,{'class':'tick',x:f(X(t)),y:g.bottom+18,'text-anchor':'middle'});
   s.textContent=fmtTime(t);xticks.appendChild(l);xticks.appendChild(s);});
  reset.hidden=(a===c.t0&&b===c.t1);
  fig.setAttribute('data-view',a+','+b);
 }
 function show(t){
  var i=nearest(c.t,t);if(i<0)return '';
  var x=X(c.t[i]),y=Y(c.b[i]);
  set(cline,{x1:x,x2:x});set(cdot,{cx:x,cy:y});
  cursor.setAttribute('visibility',c.t[i]>=view.a&&c.t[i]<=view.b?'visible':'hidden');
  var text=fmtTime(c.t[i])+' into the step ('+exact(c.t[i])+' us)\n'+fmtBytes(c.b[i])+' ('+exact(c.b[i])+' bytes)'+
   (c.baseline===null?' relative to the step start':'')+'\nafter '+data.names[c.n[i]];
  var j=nearest(c.snaps.t,t);
  if(j>=0&&Math.abs(X(c.snaps.t[j])-X(t))<=4){
   text+='\nsnapshot after '+data.names[c.snaps.n[j]]+': '+fmtBytes(c.snaps.b[j])+
    (c.snaps.ok[j]?' (agrees with the replay)':' (the replay says '+fmtBytes(c.snaps.r[j])+')');}
  tip.textContent=text;tip.hidden=false;
  var w=fig.clientWidth,px=x/svg.viewBox.baseVal.width*w;
  if(px>w/2){tip.style.left='';tip.style.right=(w-px+12)+'px';}else{tip.style.right='';tip.style.left=(px+12)+'px';}
  return text;}
 function hide(){cursor.setAttribute('visibility','hidden');tip.hidden=true;}
 svg.addEventListener('mousedown',function(e){drag={x:localX(e),moved:false};e.preventDefault();});
 svg.addEventListener('mousemove',function(e){
  var x=localX(e);
  if(drag&&Math.abs(x-drag.x)>4){drag.moved=true;
   set(sel,{x:f(Math.min(x,drag.x)),width:f(Math.abs(x-drag.x)),visibility:'visible'});return;}
  if(!pinned)show(toTime(x));});
 svg.addEventListener('mouseup',function(e){
  var x=localX(e),d=drag;drag=null;sel.setAttribute('visibility','hidden');
  if(d&&d.moved){var a=toTime(Math.min(x,d.x)),b=toTime(Math.max(x,d.x));
   if(b-a>=1){pinned=false;fig.classList.remove('pinned');hide();draw(a,b);}return;}
  pinned=!pinned;fig.classList.toggle('pinned',pinned);if(pinned)show(toTime(x));else hide();});
 svg.addEventListener('mouseleave',function(){drag=null;sel.setAttribute('visibility','hidden');if(!pinned)hide();});
 svg.addEventListener('dblclick',function(){draw(c.t0,c.t1);});
 reset.addEventListener('click',function(){draw(c.t0,c.t1);});
 charts.push({fig:fig,c:c,svg:svg,show:show,hide:hide,draw:draw,X:X,localX:localX});
});
Array.prototype.forEach.call(document.querySelectorAll('.icicle'),function(box){
 var bars=Array.prototype.slice.call(box.querySelectorAll('.ic'));
 function open(a,b,depth){bars.forEach(function(el){
  var x0=Number(el.getAttribute('data-x0')),x1=Number(el.getAttribute('data-x1')),d=Number(el.getAttribute('data-depth'));
  var inside=x1>a+1e-9&&x0<b-1e-9;
  if(d<depth){el.style.left='0%';el.style.width='100%';el.style.display=inside?'':'none';return;}
  el.style.display=inside?'':'none';
  el.style.left=(100*(Math.max(x0,a)-a)/(b-a))+'%';el.style.width=(100*(Math.min(x1,b)-Math.max(x0,a))/(b-a))+'%';});
  box.setAttribute('data-open',a+','+b+','+depth);}
 bars.forEach(function(el){el.addEventListener('click',function(){
  var d=Number(el.getAttribute('data-depth'));
  if(d===0){open(0,1,0);return;}
  open(Number(el.getAttribute('data-x0')),Number(el.getAttribute('data-x1')),d);});});
});
document.documentElement.setAttribute('data-ready',String(charts.length));
if(location.hash==='#selftest'){
 var numbers=function(d){return (d.match(/-?[0-9.]+/g)||[]).map(Number);};
 charts.forEach(function(h){
  if(!h.c.peak)return;
  var r=h.svg.getBoundingClientRect(),scale=r.width/h.svg.viewBox.baseVal.width,y=r.top+r.height/2;
  function mouse(type,x){h.svg.dispatchEvent(new MouseEvent(type,{clientX:r.left+x*scale,clientY:y,bubbles:true}));}
  var px=h.X(h.c.peak.t);
  mouse('mousemove',px);h.fig.setAttribute('data-hover',h.fig.querySelector('.tip').textContent);
  h.fig.setAttribute('data-at-peak',h.show(h.c.peak.t));
  var before=numbers(h.svg.querySelector('.curve').getAttribute('d'));
  h.draw(h.c.v0,h.c.v1);
  var after=numbers(h.svg.querySelector('.curve').getAttribute('d'));
  var same=before.length===after.length&&before.every(function(v,k){return Math.abs(v-after[k])<0.11;});
  h.fig.setAttribute('data-redraw',same?'same':'differs '+before.length+' '+after.length);
  mouse('mousedown',Math.max(px-40,h.c.geometry.left));mouse('mousemove',px+40);mouse('mouseup',px+40);
  h.fig.setAttribute('data-zoomed',h.fig.getAttribute('data-view')+(h.fig.querySelector('.reset').hidden?'':' reset-shown'));
  h.draw(h.c.v0,h.c.v1);h.hide();});
 Array.prototype.forEach.call(document.querySelectorAll('.icicle'),function(box){
  var bar=box.querySelector('.ic[data-depth="2"]')||box.querySelector('.ic[data-depth="1"]');if(!bar)return;
  bar.click();var shown=Array.prototype.filter.call(box.querySelectorAll('.ic'),function(el){return el.style.display!=='none';});
  box.setAttribute('data-selftest',box.getAttribute('data-open')+' '+bar.style.width+' '+shown.length);
  box.querySelector('.ic[data-depth="0"]').click();});
}
var zoom=/^#zoom=(-?[0-9.]+),(-?[0-9.]+)$/.exec(location.hash);
if(zoom&&Number(zoom[2])>Number(zoom[1]))charts.forEach(function(h){h.draw(Number(zoom[1]),Number(zoom[2]));});
})();
